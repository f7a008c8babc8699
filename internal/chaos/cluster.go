package chaos

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rowq/rowq/client"
)

// node is one `rowq serve` process of the cluster.
type node struct {
	id   string
	addr string
	// slot is the node's place among the Nodes, kept by its replacement;
	// dbURL is the database URL it was given.
	slot  int
	dbURL string
	cmd   *exec.Cmd
	api   *client.Client
	log   string        // path of its output
	done  chan struct{} // closed once the process has exited
	// stopped is set while the node is SIGSTOPped; guarded by cluster.mu.
	stopped bool
}

func (n *node) exited() bool {
	select {
	case <-n.done:
		return true
	default:
		return false
	}
}

// cluster runs the nodes and knows which are up.
type cluster struct {
	o     *Options
	run   string // this run's id, part of every node id
	env   []string
	mu    sync.Mutex
	up    []*node // started and not killed, in start order
	all   []*node // every node ever started
	count int
	rr    int // round robin over up nodes
}

func newCluster(o *Options, run string) *cluster {
	env := []string{}
	for _, kv := range os.Environ() {
		// The nodes see only the configuration the run gives them.
		if !strings.HasPrefix(kv, "ROWQ_") && !strings.HasPrefix(kv, "FIREWORQ_") {
			env = append(env, kv)
		}
	}
	// JSON logs: the run reads the nodes' reaps from them (reaps.go).
	env = append(env,
		"ROWQ_QUEUE_DEFAULT=",
		"ROWQ_LOG_FORMAT=json",
		"ROWQ_GRAB_LEASE="+o.GrabLease.String(),
		"ROWQ_CONFIG_REFRESH_INTERVAL="+o.RefreshInterval.String(),
		"ROWQ_RESCUE_INTERVAL="+o.RescueInterval.String(),
		"ROWQ_SHUTDOWN_TIMEOUT=5s",
		"ROWQ_LOG_LEVEL="+o.NodeLogLevel,
	)
	if o.NodeTTL > 0 {
		env = append(env, "ROWQ_NODE_TTL="+o.NodeTTL.String())
	}
	return &cluster{o: o, run: run, env: env}
}

// databaseURL is the database URL of the node in slot.
func (c *cluster) databaseURL(slot int) string {
	if len(c.o.NodeDatabaseURLs) == 0 {
		return c.o.DatabaseURL
	}
	return c.o.NodeDatabaseURLs[slot%len(c.o.NodeDatabaseURLs)]
}

// start starts a new node in slot and waits until it answers GET /healthz.
// A port taken between choosing and binding it is retried on another.
func (c *cluster) start(ctx context.Context, slot int) (*node, error) {
	c.mu.Lock()
	c.count++
	id := fmt.Sprintf("chaos-%s-%d", c.run, c.count)
	c.mu.Unlock()
	for attempt := 1; ; attempt++ {
		n, err := c.spawn(id, slot)
		if err != nil {
			return nil, err
		}
		err = waitHealthy(ctx, n, 60*time.Second)
		if err == nil {
			c.mu.Lock()
			c.up = append(c.up, n)
			c.mu.Unlock()
			return n, nil
		}
		if n.exited() && attempt < 3 && logContains(n.log, "address already in use") {
			continue
		}
		c.kill(n)
		return nil, fmt.Errorf("start node %s: %w (log: %s)", id, err, n.log)
	}
}

func (c *cluster) spawn(id string, slot int) (*node, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	logPath := filepath.Join(c.o.Dir, id+".log")
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cmd := exec.Command(c.o.Exe, "serve")
	cmd.Dir = c.o.Dir
	dbURL := c.databaseURL(slot)
	cmd.Env = append(c.env[:len(c.env):len(c.env)], "ROWQ_DATABASE_URL="+dbURL,
		"ROWQ_BIND="+addr, "ROWQ_NODE_ID="+id, "ROWQ_DISPATCH_USER_AGENT="+id)
	cmd.Stdout, cmd.Stderr = f, f
	// A process group of its own: a Ctrl-C of the chaos run reaches the
	// run, which then stops its nodes itself.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s serve: %w", c.o.Exe, err)
	}
	n := &node{id: id, addr: addr, slot: slot, dbURL: dbURL, cmd: cmd, log: logPath, done: make(chan struct{}),
		api: client.New("http://"+addr, &http.Client{Timeout: 5 * time.Second})}
	c.mu.Lock()
	c.all = append(c.all, n)
	c.mu.Unlock()
	go func() {
		cmd.Wait()
		close(n.done)
	}()
	return n, nil
}

func waitHealthy(ctx context.Context, n *node, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		err := n.api.Do(ctx, http.MethodGet, "/healthz", nil, nil, nil)
		switch {
		case err == nil:
			return nil
		case n.exited():
			return fmt.Errorf("exited with code %d before it was healthy", n.cmd.ProcessState.ExitCode())
		case time.Now().After(deadline):
			return fmt.Errorf("GET /healthz did not answer 200 within %v: %w", timeout, err)
		case ctx.Err() != nil:
			return ctx.Err()
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func logContains(path, s string) bool {
	b, _ := os.ReadFile(path)
	return strings.Contains(string(b), s)
}

// pick returns an up node that is not stopped, round robin; nil if none.
func (c *cluster) pick() *node {
	c.mu.Lock()
	defer c.mu.Unlock()
	for range c.up {
		c.rr++
		if n := c.up[c.rr%len(c.up)]; !n.stopped {
			return n
		}
	}
	return nil
}

// byID returns the up node with id, nil if none.
func (c *cluster) byID(id string) *node {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.up {
		if n.id == id {
			return n
		}
	}
	return nil
}

// leader asks an up node which node leads queue; "" when none answers.
func (c *cluster) leader(ctx context.Context, queue string) string {
	n := c.pick()
	if n == nil {
		return ""
	}
	got, err := n.api.QueueNode(ctx, queue)
	if err != nil {
		return ""
	}
	return got.ID
}

// kill sends SIGKILL to n, removes it from the up nodes and waits for it
// to exit.
func (c *cluster) kill(n *node) error {
	c.mu.Lock()
	for i, u := range c.up {
		if u == n {
			c.up = append(c.up[:i:i], c.up[i+1:]...)
			break
		}
	}
	c.mu.Unlock()
	err := n.cmd.Process.Signal(syscall.SIGKILL)
	if errors.Is(err, os.ErrProcessDone) {
		err = nil
	}
	<-n.done
	return err
}

// freeze sends SIGSTOP (on) or SIGCONT (off) to n.
func (c *cluster) freeze(n *node, on bool) error {
	sig := syscall.SIGCONT
	if on {
		sig = syscall.SIGSTOP
	}
	c.mu.Lock()
	n.stopped = on
	c.mu.Unlock()
	return n.cmd.Process.Signal(sig)
}

// close stops every node still running: SIGCONT for frozen ones, SIGTERM,
// and SIGKILL for those not gone within timeout.
func (c *cluster) close(timeout time.Duration) {
	c.mu.Lock()
	all := append([]*node(nil), c.all...)
	c.up = nil
	c.mu.Unlock()
	for _, n := range all {
		if !n.exited() {
			n.cmd.Process.Signal(syscall.SIGCONT)
			n.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	deadline := time.Now().Add(timeout)
	for _, n := range all {
		select {
		case <-n.done:
		case <-time.After(time.Until(deadline)):
			n.cmd.Process.Signal(syscall.SIGKILL)
			<-n.done
		}
	}
}

// nodes returns every node ever started.
func (c *cluster) nodes() []*node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.all)
}

// running returns the up nodes that are not stopped.
func (c *cluster) running() []*node {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ns []*node
	for _, n := range c.up {
		if !n.stopped {
			ns = append(ns, n)
		}
	}
	return ns
}

func (c *cluster) isStopped(n *node) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return n.stopped
}
