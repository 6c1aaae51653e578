"""Model families. Importing this package imports every family module, which registers its weights,
converters and scorers (each module registers itself; nothing else lists them)."""

import importlib
import pkgutil

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")
