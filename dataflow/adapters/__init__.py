"""Thin adapters into ML frameworks: the only modules that import one, each on use.

``import dataflow`` imports no framework. Import the adapter you need:
``from dataflow.adapters.torch import to_torch, DevicePrefetcher``;
``from dataflow.adapters.tf import dataflow_to_dataset, QueueInput, ...``;
``from dataflow.adapters.jax import prefetch_to_device``.
"""
