"""Patches of FastDeploy's proposer (see each module)."""
