"""One module per rule; every ``Rule`` subclass defined here is registered by being defined."""
