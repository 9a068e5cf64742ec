"""Empty stand-in for ``ogb.linkproppred``: node2vec's utils.py star-imports it and uses nothing from it."""
__all__: list[str] = []
