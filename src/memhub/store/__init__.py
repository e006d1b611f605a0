"""Storage: the Store protocol and its backends."""
