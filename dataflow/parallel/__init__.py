"""Parallel execution: the only package that starts processes or threads or opens sockets."""
