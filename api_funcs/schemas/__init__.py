"""Every body the document publishes, in its feature's module, so a feature's app builds its own."""
