"""stackrace: race web-server stacks side by side, live."""

__version__ = "0.1.0"
