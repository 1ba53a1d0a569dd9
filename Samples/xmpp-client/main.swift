print("xmpp-client")
