"""NCCL over EFA: environment presets, checks for silent fallbacks, and nccl-tests output parsing.

Torch-free and pure: nothing here runs a program or reads the network.
"""
