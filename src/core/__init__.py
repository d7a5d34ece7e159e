"""The domain core: plans, results, errors, search types, text utilities and the roles agents play.

Imports no other dagrag module but config.
"""
