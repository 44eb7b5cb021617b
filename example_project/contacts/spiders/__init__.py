"""The project's spiders (``SPIDER_MODULES`` in ``contacts/settings.py``)."""
