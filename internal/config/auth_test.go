package config

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func loadWith(t *testing.T, env map[string]string, args ...string) (Config, error) {
	t.Helper()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return Load(fs, args, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
}

func TestLoad_AuthAndAdminToken(t *testing.T) {
	secret := strings.Repeat("s3cr3t", 8)
	file := filepath.Join(t.TempDir(), "admin")
	if err := os.WriteFile(file, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		env       map[string]string
		args      []string
		wantAuth  string
		wantAdmin string
		err       string
	}{
		{name: "defaults", wantAuth: "auto"},
		{name: "env", env: map[string]string{"ROWQ_AUTH": "off", "ROWQ_ADMIN_TOKEN": secret}, wantAuth: "off", wantAdmin: secret},
		{name: "flag over env", env: map[string]string{"ROWQ_AUTH": "off"}, args: []string{"--auth=on"}, wantAuth: "on"},
		{name: "file", args: []string{"--admin-token-file", file}, wantAuth: "auto", wantAdmin: secret},
		{name: "file and env", env: map[string]string{"ROWQ_ADMIN_TOKEN": secret}, args: []string{"--admin-token-file", file}, err: "both set"},
		{name: "missing file", args: []string{"--admin-token-file", file + ".nope"}, err: "admin-token-file:"},
		{name: "short admin token", env: map[string]string{"ROWQ_ADMIN_TOKEN": "short"}, err: "at least 32 characters, got 5"},
		{name: "bad mode", args: []string{"--auth=maybe"}, err: `auth: want auto, on or off, got "maybe"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := loadWith(t, tc.env, tc.args...)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				if strings.Contains(err.Error(), "short") && tc.env["ROWQ_ADMIN_TOKEN"] == "short" {
					t.Fatalf("the error shows the admin token: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Auth != tc.wantAuth || cfg.AdminToken != tc.wantAdmin {
				t.Fatalf("Auth %q, AdminToken %q; want %q, %q", cfg.Auth, cfg.AdminToken, tc.wantAuth, tc.wantAdmin)
			}
			for k, v := range cfg.Settings(func(s string) string { return s }) {
				if tc.wantAdmin != "" && strings.Contains(v, tc.wantAdmin) {
					t.Fatalf("Settings()[%q] shows the admin token", k)
				}
			}
		})
	}
}
