"""Deletion: finalizers, ``deletionTimestamp``, propagation, garbage collection, namespaces.

- An object with finalizers is not removed by DELETE: it gets ``deletionTimestamp``
  (and a generation bump) and stays until an update removes its last finalizer.
- ``propagationPolicy``: ``Background`` removes the object, then its dependents
  (objects whose ``ownerReferences`` name it and have no other live owner; dependents
  with another live owner just lose the dangling reference). ``Foreground`` adds the
  ``foregroundDeletion`` finalizer, deletes the dependents, and removes the owner once
  no dependent with ``blockOwnerDeletion: true`` is left. ``Orphan`` adds the
  ``orphan`` finalizer, strips the owner reference from the dependents, then removes
  the owner.
- Deleting a Namespace marks it ``Terminating``, deletes everything in it, and removes
  it once it is empty (and has no finalizers of its own); nothing new can be created
  in a terminating namespace.
- Deleting a CustomResourceDefinition stops serving its resource and removes every
  custom resource of it (their finalizers are not waited for).

Kubernetes' garbage collector and namespace controller work asynchronously; here
their work is done at once, inside the request that triggers it, so tests see the
end state as soon as the DELETE (or the finalizer-removing update) returns.
"""

from __future__ import annotations

from mkpolicy.testing.apiserver import resources as R
from mkpolicy.testing.apiserver.jsonutil import JsonObject, now_rfc3339
from mkpolicy.testing.apiserver.resources import PropagationPolicy, Registry
from mkpolicy.testing.apiserver.storage import Store, Stored

ORPHAN = "orphan"
FOREGROUND = "foregroundDeletion"


def _copy_for_write(stored: Stored) -> JsonObject:
    """A copy of ``stored`` whose top level and metadata may be changed."""
    return {**stored.obj, "metadata": dict(stored.meta)}


class Lifecycle:
    """Carries out deletions on a store, with Kubernetes' cascading rules."""

    def __init__(self, registry: Registry, store: Store) -> None:
        self.registry = registry
        self.store = store

    def _type(self, resource: tuple[str, str]) -> R.ResourceType | None:
        return self.registry.get(*resource)

    # -- entry points -----------------------------------------------------------------

    def delete(
        self, rt: R.ResourceType, stored: Stored, propagation: PropagationPolicy, *, dry_run: bool = False
    ) -> tuple[Stored, bool]:
        """Delete ``stored``; returns its resulting state and whether it is gone."""
        meta = stored.meta
        if meta.get("deletionTimestamp"):
            # Already being deleted: nothing changes (kube-apiserver answers the same way).
            return stored, False
        finalizers = [f for f in meta.get("finalizers") or [] if f not in (ORPHAN, FOREGROUND)]
        if propagation == "Orphan":
            finalizers.append(ORPHAN)
        elif propagation == "Foreground":
            finalizers.append(FOREGROUND)
        if not finalizers and rt.key != R.NAMESPACES.key:
            if dry_run:
                return stored, True
            return self.remove(rt, stored), True
        obj = _copy_for_write(stored)
        obj["metadata"]["deletionTimestamp"] = now_rfc3339()
        obj["metadata"]["deletionGracePeriodSeconds"] = 0
        if finalizers:
            obj["metadata"]["finalizers"] = finalizers
        if rt.tracks_generation:
            obj["metadata"]["generation"] = int(meta.get("generation") or 0) + 1
        if rt.key == R.NAMESPACES.key:
            obj["status"] = {**(obj.get("status") or {}), "phase": "Terminating"}
        if dry_run:
            return Stored(obj, stored.rv), False
        current = self.store.replace(rt.key, stored, obj)
        if propagation == "Orphan":
            self._orphan_dependents(current)
        elif propagation == "Foreground":
            self._delete_dependents(current)
        if rt.key == R.NAMESPACES.key:
            self._empty_namespace(current.meta["name"])
        latest = self.store.get(rt.key, current.key)
        if latest is None or latest.meta.get("uid") != current.meta.get("uid"):
            return current, True
        return self.finish_if_done(rt, latest)

    def finish_if_done(self, rt: R.ResourceType, stored: Stored) -> tuple[Stored, bool]:
        """Remove a terminating object whose finalizers are all gone; returns (state, gone)."""
        meta = stored.meta
        if not meta.get("deletionTimestamp"):
            return stored, False
        finalizers = meta.get("finalizers") or []
        if finalizers == [ORPHAN]:
            self._orphan_dependents(stored)
        elif finalizers == [FOREGROUND]:
            self._release_foreground(stored)
        latest = self.store.get(rt.key, stored.key)
        if latest is None:
            return stored, True
        if latest.meta.get("finalizers"):
            return latest, False
        if rt.key == R.NAMESPACES.key and self.store.ns_counts.get(latest.meta["name"], 0):
            return latest, False
        return self.remove(rt, latest), True

    def remove(self, rt: R.ResourceType, stored: Stored) -> Stored:
        """Remove ``stored`` now and cascade: dependents, waiting owners, namespace, CRD."""
        gone = self.store.remove(rt.key, stored)
        uid = stored.meta.get("uid", "")
        if rt.key == R.CRDS.key:
            self._drop_custom_resource(stored.obj)
        self._collect_dependents(uid)
        for ref in stored.meta.get("ownerReferences") or []:
            owner = self.store.lookup_uid(ref.get("uid", ""))
            if owner is not None and FOREGROUND in (owner[1].meta.get("finalizers") or []):
                self._release_foreground(owner[1])
        ns = stored.key[0]
        if ns and not self.store.ns_counts.get(ns):
            namespace = self.store.get(R.NAMESPACES.key, ("", ns))
            if namespace is not None and namespace.meta.get("deletionTimestamp"):
                self.finish_if_done(R.NAMESPACES, namespace)
        return gone

    # -- cascades ---------------------------------------------------------------------

    def _collect_dependents(self, uid: str) -> None:
        for resource, dep in self.store.dependents_of(uid):
            dep_rt = self._type(resource)
            if dep_rt is None:
                continue
            refs = [r for r in dep.meta.get("ownerReferences") or [] if r.get("uid") != uid]
            if any(self.store.lookup_uid(r.get("uid", "")) is not None for r in refs):
                obj = _copy_for_write(dep)
                obj["metadata"]["ownerReferences"] = refs
                self.store.replace(resource, dep, obj)
            else:
                self.delete(dep_rt, dep, "Background")

    def _orphan_dependents(self, owner: Stored) -> None:
        uid = owner.meta.get("uid", "")
        for resource, dep in self.store.dependents_of(uid):
            obj = _copy_for_write(dep)
            refs = [r for r in dep.meta.get("ownerReferences") or [] if r.get("uid") != uid]
            if refs:
                obj["metadata"]["ownerReferences"] = refs
            else:
                obj["metadata"].pop("ownerReferences", None)
            self.store.replace(resource, dep, obj)
        self._drop_finalizer(owner, ORPHAN)

    def _delete_dependents(self, owner: Stored) -> None:
        for resource, dep in self.store.dependents_of(owner.meta.get("uid", "")):
            dep_rt = self._type(resource)
            if dep_rt is not None:
                self.delete(dep_rt, dep, "Background")
        latest = self._latest(owner)
        if latest is not None:
            self._release_foreground(latest)

    def _release_foreground(self, owner: Stored) -> None:
        uid = owner.meta.get("uid", "")
        blocking = [
            dep
            for _, dep in self.store.dependents_of(uid)
            if any(r.get("uid") == uid and r.get("blockOwnerDeletion") is True for r in dep.meta["ownerReferences"])
        ]
        if not blocking:
            self._drop_finalizer(owner, FOREGROUND)

    def _drop_finalizer(self, owner: Stored, finalizer: str) -> None:
        latest = self._latest(owner)
        if latest is None or finalizer not in (latest.meta.get("finalizers") or []):
            return
        resource = self.store.by_uid[latest.meta["uid"]][0]
        obj = _copy_for_write(latest)
        rest = [f for f in latest.meta["finalizers"] if f != finalizer]
        if rest:
            obj["metadata"]["finalizers"] = rest
        else:
            obj["metadata"].pop("finalizers", None)
        updated = self.store.replace(resource, latest, obj)
        rt = self._type(resource)
        if rt is not None and not rest:
            self.finish_if_done(rt, updated)

    def _latest(self, stored: Stored) -> Stored | None:
        found = self.store.lookup_uid(stored.meta.get("uid", ""))
        return found[1] if found is not None else None

    def _empty_namespace(self, name: str) -> None:
        for rt in self.registry:
            if not rt.namespaced:
                continue
            coll = self.store.collections.get(rt.key)
            if coll is None:
                continue
            for key in [k for k in coll.sorted_keys() if k[0] == name]:
                stored = coll.objects.get(key)
                if stored is not None:
                    self.delete(rt, stored, "Background")

    def _drop_custom_resource(self, crd: JsonObject) -> None:
        spec = crd.get("spec") or {}
        resource = (spec.get("group", ""), (spec.get("names") or {}).get("plural", ""))
        rt = self.registry.get(*resource)
        if rt is None or rt.builtin:
            return
        coll = self.store.collections.get(resource)
        if coll is not None:
            for key in list(coll.sorted_keys()):
                self.store.remove(resource, coll.objects[key])
            # Open watches of the resource end with it.
            for sink in list(coll.sinks):
                sink.end()
            coll.sinks.clear()
        self.registry.remove(resource)
        self.store.drop(resource)
