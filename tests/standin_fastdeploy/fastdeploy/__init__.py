"""A stand-in for FastDeploy, for tests/test_plugin.py: our own code, laid out
as FastDeploy's modules are, doing only what the plugin's path through
FastDeploy needs. Which FastDeploy commit's ops it exposes is
STANDIN_FASTDEPLOY_COMMIT (model_executor/ops/gpu/fastdeploy_ops.py)."""
