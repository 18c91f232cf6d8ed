"""One module per command; each is imported only when its command runs."""
