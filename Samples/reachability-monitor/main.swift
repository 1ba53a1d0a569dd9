print("monitor")
