print("line-server")
