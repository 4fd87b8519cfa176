"""Controllers that make simcluster behave like a cluster (operators, scheduler, kubelet...)."""

from .base import Controller, record_event

__all__ = ["Controller", "record_event"]
