"""The configuration: TOML, environment and flags read once into frozen, validated dataclasses."""
