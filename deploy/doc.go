// Package deploy holds the files that put replicad into service, and the
// tests that check them with the tools a user would use:
//
//   - ../Containerfile and image/ (passwd, group): the image, built by
//     make image; TestImage (make image-test) builds it with podman, unpacks
//     it and runs its binaries from the rootfs (this VM cannot run
//     containers);
//   - compose.yaml: a controller, three brokers and Jaeger, decoded strictly
//     by TestCompose;
//   - systemd/: units for a broker and a controller, checked by
//     systemd-analyze verify in TestSystemdUnits;
//   - kubernetes/: a StatefulSet of brokers, the controllers on etcd, the
//     Services and a PodDisruptionBudget, decoded strictly by TestKubernetes
//     (no cluster here to apply them to);
//   - config/: example --config files;
//   - monitoring/: Prometheus rules (with promtool unit tests), a Grafana
//     dashboard and a scrape config, checked by the real promtool and
//     Prometheus in tests/integration (TestMonitoringFilesPassPromtool,
//     TestPrometheusAlertsOnBrokerDeath), which also run a cluster.
//
// It has no code of its own.
package deploy
