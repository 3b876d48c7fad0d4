package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gbytes"
)

const scenarioFile = "../../test/scenarios/provisioned-region-incident.yaml"

func TestRunServesUntilCancelled(t *testing.T) {
	dir := t.TempDir()
	addrFile := filepath.Join(dir, "addresses.json")
	statsFile := filepath.Join(dir, "stats.json")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := gbytes.NewBuffer() // safe for the writer and the test at once
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--scenario", scenarioFile, "--seed", "3", "--scale", "1",
			"--addresses-file", addrFile, "--stats-file", statsFile}, out, io.Discard)
	}()

	// Wait for the addresses file: it is written once everything listens.
	var addrs Addresses
	NewWithT(t).Eventually(func() error {
		select {
		case err := <-done:
			t.Fatalf("run ended early: %v\n%s", err, string(out.Contents()))
		default:
		}
		b, err := os.ReadFile(addrFile)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(b, &addrs); err != nil {
			t.Fatalf("addresses file: %v", err)
		}
		return nil
	}).WithTimeout(10*time.Second).WithPolling(10*time.Millisecond).Should(Succeed(), func() string { return "no addresses file; output:\n" + string(out.Contents()) })
	if len(addrs.Regions) != 4 || addrs.Monitoring == "" || addrs.Regions["europe-west1"].Tier != "provisioned" {
		t.Fatalf("addresses %+v", addrs)
	}
	for name, r := range addrs.Regions {
		if !strings.Contains(string(out.Contents()), r.GRPC) || !strings.Contains(string(out.Contents()), r.REST) {
			t.Errorf("%s's addresses are not printed:\n%s", name, string(out.Contents()))
		}
	}

	url := "http://" + addrs.Regions["europe-west4"].REST +
		"/v1/projects/demo-project/locations/europe-west4/publishers/google/models/gemini-3.6-flash:generateContent"
	resp, err := http.Post(url, "application/json", strings.NewReader(`{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
	if !strings.Contains(string(out.Contents()), "final stats:") {
		t.Errorf("no final stats printed:\n%s", string(out.Contents()))
	}
	var st struct {
		Regions []struct {
			Name   string           `json:"name"`
			ByCode map[string]int64 `json:"byCode"`
		} `json:"regions"`
	}
	b, err := os.ReadFile(statsFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	if st.Regions[1].Name != "europe-west4" || st.Regions[1].ByCode["OK"] != 1 {
		t.Errorf("final stats %+v, want one OK call in europe-west4", st.Regions)
	}
}

func TestRunRefusesBadInput(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("name: x\nproject: p\nmodel: m\nduration: 1m\nload: {requestsPerSecond: 1}\nregions:\n- name: europe-west1\n  tier: shared\n  capacty: {requestsPerSecond: 1}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		args []string
		want string
	}{
		{args: nil, want: "--scenario is required"},
		{args: []string{"--scenario", bad}, want: `unknown field "regions[0].capacty"`},
		{args: []string{"--scenario", filepath.Join(dir, "missing.yaml")}, want: "no such file"},
		{args: []string{"--scenario", scenarioFile, "--scale", "-1"}, want: "--scale must not be negative"},
	}
	for _, tt := range tests {
		err := run(context.Background(), tt.args, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("args %q: error %v, want one containing %q", tt.args, err, tt.want)
		}
	}
}
