"""Measurements as data: built from the declared schema, a neighbouring relation and a
budget before any row is read (docs/measurements.md)."""

from privlab.measure.measurement import Domain, Measurement, measurement
from privlab.measure.noise import Noise
from privlab.measure.relation import AddRemove, Person, Relation, Replace, relation_of

__all__ = ["AddRemove", "Domain", "Measurement", "Noise", "Person", "Relation", "Replace",
           "measurement", "relation_of"]
