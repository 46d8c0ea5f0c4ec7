package main

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// call sends a request (method, url, body; hdr set on it) with the
// default client and returns the response and its whole body, closed. It
// fails the test when the request cannot be made or sent or its body
// cannot be read, so that a caller's checks see only a whole answer.
func call(t *testing.T, method, url, body string, hdr map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the body: %v", method, url, err)
	}
	return resp, b
}

// bearer is the header of an admin token; none for "".
func bearer(token string) map[string]string {
	if token == "" {
		return nil
	}
	return map[string]string{"Authorization": "Bearer " + token}
}

// get returns the status and body of GET url.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, b := call(t, http.MethodGet, url, "", nil)
	return resp.StatusCode, string(b)
}
