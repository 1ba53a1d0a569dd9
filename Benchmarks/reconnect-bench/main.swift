print("reconnect-bench")
