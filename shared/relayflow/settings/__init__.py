"""Settings declared once each: a dataclass field carries its variable, default, parser and
meaning (:func:`relayflow.settings.declare.setting`), and the reading, the variable list, the
error messages and the docs table derive from it. The value parsers are in
:mod:`relayflow.settings.parsers`; :mod:`relayflow.config` declares the deployment's settings.
"""
