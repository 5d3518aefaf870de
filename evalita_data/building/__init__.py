"""The build: reading raw folders, the one pipeline (converter -> schema check -> writer),
fetching the public originals, the conversion report, worker processes, atomic install."""
