"""stackrace: race web-server stacks side by side, live."""

__version__ = "0.2.0"
