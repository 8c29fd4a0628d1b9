"""Storage formats: dump a prepared dataset once, read it fast many times (every name here is
imported from :mod:`dataflow`; the modules of this package are private).

- :class:`LMDBSerializer` / :class:`LMDBData` / :class:`LMDBDataDecoder` — LMDB (random
  access, shuffling, larger than memory); needs ``pip install "dataflow-ml[lmdb]"``.
- :class:`TFRecordSerializer` / :class:`TFRecordData` — TFRecord files, read and written
  without TensorFlow (which reads ours as they are), an index file beside each for ``len``
  and random access, and ``tf.train.Example`` records parsed with ``protobuf``
  (``decode="example"``, ``pip install "dataflow-ml[tfrecord]"``).
- :class:`NumpySerializer` — one ``.npz`` file, whole dataset in memory, no pickle.
- :class:`HDF5Serializer` / :class:`HDF5Data` — one HDF5 dataset per component; needs
  ``pip install "dataflow-ml[hdf5]"``.
- :func:`CaffeLMDB` (Caffe's ``Datum`` LMDBs) and :class:`SVMLightData` (SVMlight text files),
  tensorpack's readers of other tools' files.

Guarantees shared by every format: datapoints are encoded with the safe codec
(:mod:`dataflow.codec`) and never unpickled; every file carries its format name and version,
and a file written by a newer version is refused with :class:`FormatError` naming the version
(and library) that wrote it; ``save`` writes to a temporary file in the target's directory
and renames it only when complete (an interrupted save leaves no file, and the temporary one
is removed); a corrupt or truncated file raises an error naming the file and the record.
"""
