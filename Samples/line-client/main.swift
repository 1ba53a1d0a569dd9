print("line-client")
