"""Source flows: wrap a list, generator, iterable, queue, arrays or text files; or fake data
(every name here is imported from :mod:`dataflow`; the modules of this package are private).

Sources have no upstream. Those with ``shuffle=``/``seed=`` are :class:`RNGDataFlow`\\ s and
draw one permutation per epoch from ``self.rng`` (so ``seed=`` or :func:`dataflow.set_seed`
make the order reproducible). Fork safety: build a source anywhere, fork or pickle it
before ``reset_state()`` (except flows over a live iterator or queue, which belong to the
process that made them), then call ``reset_state()`` in the process that iterates.
Random-access sources (:class:`~._indexed.IndexedSource`) checkpoint and shard by index.
"""
