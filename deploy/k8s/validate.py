#!/usr/bin/python3
"""validate.py -- check hetps's Kubernetes manifests offline.

    deploy/k8s/validate.py DIR_OR_FILE...

kubectl's own checks need an API server (even --dry-run=client asks one for
its API list and OpenAPI schema), so this checks without one: each object
against schema.json (the Kubernetes API's fields that hetps k8s uses, with
their types, enums and name rules; anything else is refused), then what the
API server and the pods would find wrong across objects: selectors that do
not match their pod labels, a StatefulSet or Job whose headless Service is
missing, a volume mount with no volume, a ConfigMap that is not there, and
a cluster.json whose addresses are not the pods' DNS names (or whose
workers are not each run by exactly one Job). Prints one line
per problem and exits 1, or "ok: N objects in M files" and exits 0.
Needs python3-yaml and python3-jsonschema (Debian).
"""
import json
import os
import sys

import jsonschema
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))


def load(paths):
    """[(file, index, object)] of every YAML document under paths."""
    docs = []
    for p in paths:
        files = sorted(os.path.join(p, f) for f in os.listdir(p)
                       if f.endswith((".yaml", ".yml"))) \
            if os.path.isdir(p) else [p]
        for f in files:
            with open(f) as fh:
                for i, d in enumerate(yaml.safe_load_all(fh)):
                    if d is not None:
                        docs.append((f, i, d))
    return docs


def where(f, i, d):
    kind = d.get("kind", "?") if isinstance(d, dict) else "?"
    name = (d.get("metadata") or {}).get("name", "?") \
        if isinstance(d, dict) else "?"
    return "%s: document %d (%s/%s)" % (f, i + 1, kind, name)


def schema_errors(schema, docs):
    validator = jsonschema.Draft7Validator(schema)
    defs = schema["definitions"]
    out = []
    for f, i, d in docs:
        kind = d.get("kind") if isinstance(d, dict) else None
        # check against the kind's own definition: its errors name the field
        sub = dict(defs[kind], definitions=defs) if kind in defs else schema
        for e in sorted(jsonschema.Draft7Validator(sub).iter_errors(d),
                        key=lambda e: list(e.absolute_path)):
            path = ".".join(str(x) for x in e.absolute_path) or "(top)"
            out.append("%s: %s: %s" % (where(f, i, d), path, e.message))
        if kind not in defs and not validator.is_valid(d):
            out.append("%s: kind %r is not one hetps writes (ConfigMap, "
                       "Service, StatefulSet, Job)" % (where(f, i, d), kind))
    return out


def subset(a, b):
    return all(b.get(k) == v for k, v in (a or {}).items())


def cross_errors(docs):
    """What the API server or the running pods would find wrong."""
    out = []
    by = {}
    for f, i, d in docs:
        key = (d["kind"], d["metadata"].get("namespace"), d["metadata"]["name"])
        if key in by:
            out.append("%s: a second %s named %s" % (where(f, i, d), key[0],
                                                     key[2]))
        by[key] = (f, i, d)

    def get(kind, ns, name):
        return by.get((kind, ns, name), (None, None, None))[2]

    counted = {}

    for (kind, ns, name), (f, i, d) in sorted(by.items(), key=lambda x:
                                              (x[1][0], x[1][1])):
        w = where(f, i, d)
        if kind not in ("StatefulSet", "Job"):
            continue
        spec = d["spec"]
        tpl = spec["template"]
        labels = tpl["metadata"].get("labels", {})
        pod = tpl["spec"]
        if kind == "StatefulSet":
            if not subset(spec["selector"]["matchLabels"], labels):
                out.append("%s: spec.selector.matchLabels does not match the "
                           "pod template's labels (the API server refuses "
                           "it)" % w)
            svc_name = spec["serviceName"]
        else:
            svc_name = pod.get("subdomain")
            if spec.get("completionMode") != "Indexed":
                out.append("%s: spec.completionMode must be Indexed: each "
                           "worker takes its task from JOB_COMPLETION_INDEX"
                           % w)
        svc = get("Service", ns, svc_name) if svc_name else None
        if svc_name and svc is None:
            out.append("%s: its headless Service %s is missing: the pods "
                       "would get no DNS names" % (w, svc_name))
        elif svc is not None:
            if svc["spec"].get("clusterIP") != "None":
                out.append("%s: Service %s must be headless (clusterIP: None)"
                           % (w, svc_name))
            if not subset(svc["spec"].get("selector"), labels) or \
                    not svc["spec"].get("selector"):
                out.append("%s: Service %s's selector does not select these "
                           "pods" % (w, svc_name))
        vols = {v["name"]: v for v in pod.get("volumes", [])}
        claims = {c["metadata"]["name"]
                  for c in spec.get("volumeClaimTemplates", [])}
        for v in vols.values():
            cm = (v.get("configMap") or {}).get("name")
            if cm and get("ConfigMap", ns, cm) is None:
                out.append("%s: volume %s names ConfigMap %s, which is not "
                           "among the manifests" % (w, v["name"], cm))
        for c in pod["containers"]:
            for m in c.get("volumeMounts", []):
                if m["name"] not in vols and m["name"] not in claims:
                    out.append("%s: container %s mounts %s, which is neither "
                               "a volume nor a volume claim" %
                               (w, c["name"], m["name"]))
        out += cluster_errors(w, kind, ns, name, spec, svc_name, pod, get,
                              counted)
    return out + worker_cover(counted, get)


def env_of(pod, name):
    for c in pod["containers"]:
        for e in c.get("env", []):
            if e["name"] == name:
                return e["value"]
    return None


def cluster_errors(w, kind, ns, name, spec, svc_name, pod, get, counted):
    """The ConfigMap's cluster.json must name exactly these pods: pod J of
    a StatefulSet is ps J, pod J of a Job is worker HETPS_INDEX_OFFSET+J.
    Adds each Job's pods to counted[ConfigMap] for the total check."""
    out = []
    for v in pod.get("volumes", []):
        cm_name = (v.get("configMap") or {}).get("name")
        cm = get("ConfigMap", ns, cm_name) if cm_name else None
        if cm is None or "cluster.json" not in cm.get("data", {}):
            continue
        try:
            cluster = json.loads(cm["data"]["cluster.json"])["cluster"]
        except (ValueError, KeyError, TypeError) as e:
            out.append("%s: ConfigMap %s: cluster.json is not a cluster: %s"
                       % (w, cm_name, e))
            continue
        job = "ps" if kind == "StatefulSet" else "worker"
        addrs = cluster.get(job, [])
        if kind == "StatefulSet":
            n, first = spec.get("replicas", 1), 0
            if len(addrs) != n:
                out.append("%s: %d pod(s), but cluster.json lists %d %s "
                           "address(es)" % (w, n, len(addrs), job))
        else:
            n = spec.get("completions", 1)
            try:
                first = int(env_of(pod, "HETPS_INDEX_OFFSET") or 0)
            except ValueError:
                out.append("%s: HETPS_INDEX_OFFSET is not a number" % w)
                continue
            counted.setdefault((ns, cm_name), []).append((first, n, w))
            if first + n > len(addrs):
                out.append("%s: workers %d..%d, but cluster.json lists %d "
                           "worker address(es)" % (w, first, first + n - 1,
                                                   len(addrs)))
        ports = {p["containerPort"] for c in pod["containers"]
                 for p in c.get("ports", [])}
        suffix = ".%s.svc" % ns if ns else ""
        for j in range(min(n, max(len(addrs) - first, 0))):
            i = first + j
            host, _, port = addrs[i].rpartition(":")
            want = "%s-%d.%s%s" % (name, j, svc_name, suffix)
            if host != want:
                out.append("%s: cluster.json %s[%d] is %s, but its pod is "
                           "reached as %s" % (w, job, i, host, want))
            if ports and int(port) not in ports:
                out.append("%s: cluster.json %s[%d] uses port %s, which the "
                           "container does not declare" % (w, job, i, port))
    return out


def worker_cover(counted, get):
    """Every worker of a ConfigMap's cluster.json in exactly one Job."""
    out = []
    for (ns, cm_name), jobs in sorted(counted.items()):
        cluster = json.loads(get("ConfigMap", ns, cm_name)["data"]
                             ["cluster.json"])["cluster"]
        seen = {}
        for first, n, w in jobs:
            for i in range(first, first + n):
                if i in seen:
                    out.append("%s: worker %d is also run by %s" %
                               (w, i, seen[i]))
                seen[i] = w
        missing = [i for i in range(len(cluster.get("worker", [])))
                   if i not in seen]
        if missing:
            out.append("ConfigMap %s: cluster.json worker(s) %s are run by no "
                       "Job" % (cm_name, ", ".join(map(str, missing))))
    return out


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if len(argv) >= 2 else 2
    with open(os.path.join(HERE, "schema.json")) as fh:
        schema = json.load(fh)
    try:
        docs = load(argv[1:])
    except (OSError, yaml.YAMLError) as e:
        print("validate: %s" % e)
        return 1
    errors = schema_errors(schema, docs)
    if not errors:
        errors = cross_errors(docs)
    for e in errors:
        print(e)
    if errors:
        return 1
    print("ok: %d objects in %d files" % (len(docs), len({f for f, _, _ in
                                                           docs})))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
