import Reconnect
