"""The data envsync reasons over: a host's environment as a snapshot, the findings made of it
and their vocabulary, the inventory's model, and the codec that writes and reads them.
"""
