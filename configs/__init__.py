"""clew.configs: the YAML presets shipped with clew (``agents/*.yaml``, ``train/*.yaml``), read as
package data with :mod:`importlib.resources`."""
