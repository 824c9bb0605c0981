"""clew.loop: ``clew loop``, search -> data -> train -> evaluate in rounds (docs/methods/loop.md)."""
