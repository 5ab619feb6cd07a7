"""Run MultiKueue with the mkpolicy sidecar end to end, on this machine, in a few seconds.

Starts three loopback Kubernetes API servers (a manager and two workers, with the
Tekton and Kueue CRDs), the sidecar with the Tekton policy (wired into the
MultiKueueCluster Secrets with --wire), and a model of Kueue's MultiKueue controllers
(v0.19.2 unless --kueue says otherwise) that connects through the sidecar and sends what
Kueue sends. A PipelineRun is submitted on the manager, dispatched to a worker, run there
(its status written as Tekton would), its status flows back to the manager as the policy
says, and its copies are removed when it finishes. Every step is checked against the
policy engine, and the requests Kueue sent are listed; the exit code is 0 when all checks pass.

Your own kind: --policy P --crd C --object O [--worker-object W]. The CRD is installed on
every cluster, Kueue's externalFrameworks names the policy's kind, O (with spec.managedBy:
kueue.x-k8s.io/multikueue) is submitted, and W's status is what the framework writes on
the worker (mkpolicy init scaffolds such files: examples/<name>.yaml and
examples/<name>-worker.yaml).

  mkpolicy init --framework SimulationRun.v1beta1.sim.acme.io --crd crd.yaml --dir sim
  mkpolicy demo --policy sim/sim-simulationrun.yaml --crd crd.yaml \\
      --object sim/examples/sim-simulationrun.yaml --worker-object sim/examples/sim-simulationrun-worker.yaml
"""

from __future__ import annotations

import argparse
import sys


def configure(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``mkpolicy demo``."""
    parser.add_argument("--policy", metavar="FILE", help="policy file (default: policies/tekton-pipelinerun.yaml)")
    parser.add_argument(
        "--object",
        "--pipelinerun",
        dest="object",
        metavar="FILE",
        help="the object to submit (default: examples/tekton/pipelinerun.yaml)",
    )
    parser.add_argument("--crd", metavar="FILE", help="the CRD of the policy's kind (installed on every cluster)")
    parser.add_argument(
        "--worker-object", metavar="FILE", help="a worker copy whose status the framework writes on the worker"
    )
    parser.add_argument("--worker", choices=["worker1", "worker2"], default="worker1", help="where Kueue dispatches")
    parser.add_argument(
        "--kueue",
        metavar="VERSION",
        default="0.19.2",
        help="the Kueue version whose requests are replayed: 0.15 .. 0.19.2, or main (default: 0.19.2)",
    )
    parser.add_argument(
        "--identifier",
        choices=["annotation", "label"],
        default=None,
        help="where Kueue records the workload name (its WorkloadIdentifierAnnotations gate; "
        "default: the version's, the annotation from 0.18)",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="show the sidecar's JSON logs")


def run(args: argparse.Namespace) -> int:
    """Run the demo."""
    import asyncio

    from mkpolicy.cli.common import EXIT_FINDINGS, EXIT_OK, EXIT_USAGE, error
    from mkpolicy.cli.demo_scenario import DemoFailed, Scenario, find_inputs
    from mkpolicy.errors import InputError, MkpolicyError
    from mkpolicy.testing.kueue import KueueVersion

    try:
        inputs = find_inputs(args.policy, args.object, args.crd, args.worker_object)
        version = KueueVersion.parse(args.kueue)
    except MkpolicyError as exc:
        error(exc)
        return EXIT_USAGE
    except ValueError as exc:
        print(f"mkpolicy demo: --kueue: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.identifier == "annotation" and not version.identifier_gate:
        print(f"mkpolicy demo: --identifier annotation: Kueue {version.name} writes the label only", file=sys.stderr)
        return EXIT_USAGE
    scenario = Scenario(
        inputs, worker=args.worker, identifier=args.identifier, kueue_version=args.kueue, verbose=args.verbose
    )
    try:
        asyncio.run(scenario.run())
    except InputError as exc:  # an object or CRD that does not fit the policy
        error(exc)
        return EXIT_USAGE
    except DemoFailed as exc:
        print(f"\nFAILED: {exc}", file=sys.stderr)
        return EXIT_FINDINGS
    except MkpolicyError as exc:
        print(f"\nFAILED: {exc.report()}", file=sys.stderr)
        return EXIT_FINDINGS
    return EXIT_OK
