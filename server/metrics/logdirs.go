package metrics

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
)

// logDirCollector exports the free and total bytes of the filesystem of
// each log dir, read with statfs(2) at each scrape (one syscall a dir): a
// disk filling up is the one broker failure that can be seen coming, and
// the log sizes alone do not tell how much room is left.
type logDirCollector struct {
	dirs           []string
	free, capacity *prometheus.Desc
	statfs         func(path string, st *syscall.Statfs_t) error
}

// ObserveLogDirs exports replicad_log_dir_free_bytes{dir} (the bytes an
// unprivileged writer may still use, statfs's f_bavail) and
// replicad_log_dir_capacity_bytes{dir} for dirs. A dir that cannot be
// statted (gone, its disk failed) has no series in that scrape. A second
// call is an error.
func (m *Metrics) ObserveLogDirs(dirs []string) error {
	if m == nil {
		return nil
	}
	if len(dirs) == 0 {
		return errors.New("metrics: ObserveLogDirs without a dir")
	}
	c := &logDirCollector{
		dirs:   append([]string(nil), dirs...),
		statfs: syscall.Statfs,
		free: prometheus.NewDesc("replicad_log_dir_free_bytes",
			"Bytes still free for replicad on the filesystem of the log dir (statfs f_bavail × f_bsize).", []string{"dir"}, nil),
		capacity: prometheus.NewDesc("replicad_log_dir_capacity_bytes",
			"Size of the filesystem of the log dir (statfs f_blocks × f_bsize).", []string{"dir"}, nil),
	}
	if err := m.registry.Register(c); err != nil {
		return fmt.Errorf("metrics: register log dir series: %w", err)
	}
	return nil
}

func (c *logDirCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.free
	ch <- c.capacity
}

func (c *logDirCollector) Collect(ch chan<- prometheus.Metric) {
	for _, dir := range c.dirs {
		var st syscall.Statfs_t
		if err := c.statfs(dir, &st); err != nil {
			continue
		}
		bsize := float64(st.Bsize)
		ch <- prometheus.MustNewConstMetric(c.free, prometheus.GaugeValue, float64(st.Bavail)*bsize, dir)
		ch <- prometheus.MustNewConstMetric(c.capacity, prometheus.GaugeValue, float64(st.Blocks)*bsize, dir)
	}
}
