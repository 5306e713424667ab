"""The collector's contract with the parts that talk to it over HTTP.

The dashboard, the alerts outside the collector, the reference stack and the command line's
remote commands import this package, never the collector's modules: ``schemas`` are the query
API's request and response models, ``client`` the one typed client over HTTP, ``handshake``
finds the collector that owns a data directory, ``labels`` says each metric in words and its unit.
The collector imports it too, for its side of the same contract, and it imports no part of the platform itself.
"""
