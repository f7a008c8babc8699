//go:build ha

package dbtest

import "testing"

func TestStartClusters(t *testing.T) {
	g := StartGalera(t)
	if len(g.Members) != 3 || g.URL == "" {
		t.Fatalf("galera: %+v", g)
	}
	p := StartPGHA(t, "sync")
	if p.URL == "" {
		t.Fatal("pg-ha: no URL")
	}
	t.Log(g.Members, g.URL, p.URL)
}

func TestClusterDatabases(t *testing.T) {
	g := StartGalera(t).Database(t)
	for _, m := range g.Members {
		OpenURL(t, m)
	}
	p := StartPGHA(t, "sync").Database(t)
	OpenURL(t, p.URL)
	t.Log(g.Members, g.URL, p.URL)
}
