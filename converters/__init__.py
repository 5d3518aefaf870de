"""One module per source format; each exposes a pure ``convert(source, report, seed)``.

Installed as ``evalita_data.converters``. Shared helpers live in ``common``.
"""
