"""The closed-loop simulator and what it checks with: the scripted base model
and draft, FastDeploy's own runner, the tiny attention model, its cache-free
oracle, and random op states. What measures and proves, not what ships: the
product (``fastdeploy_mtp.ops``, ``proposer``, ``captured``, ...) never imports
it."""
