"""The ``mkpolicy`` command line. Thin: parsing and printing around the library."""
