"""fastdeploy_mtp: the draft model's bookkeeping for MTP speculative decoding.

- ``fastdeploy_mtp.ops``: the custom ops ``draft_model_preprocess`` and
  ``update_attn_mask_offsets`` (CPU and CUDA), as typed wrappers.
- ``fastdeploy_mtp.reference``: the same ops in plain numpy, from docs/contract.md.
- ``fastdeploy_mtp.signature``: the one table of the ops' signatures
  (``signature_cpp`` renders the C++ from it).
- ``fastdeploy_mtp.proposer``: MTPProposer, the draft state of a runner.
- ``fastdeploy_mtp.plugin``: the FastDeploy plugin (``FD_PLUGINS=fastdeploy_mtp``).
- ``python -m fastdeploy_mtp --help`` (also ``fastdeploy-mtp``): ``doctor``,
  ``build``, ``check``, ``signature``, ``simulate``, ``verdict``,
  ``reproduce``, ``bench``, ``bench-sim``, ``bench-gpu``.

Importing the package loads nothing heavy and changes nothing outside it
(warnings filters, loggers, the environment); the op library is loaded (or
built) on the first op call.
"""

__version__ = "0.1.0"
