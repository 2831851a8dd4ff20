// A stdlib-only Go mutating webhook: the baseline the scale-up compares netqos-webhook with
// (benchmarks/realscale.py). For a pod labelled qos=latency-sensitive, not opted out
// (netqos.io/inject: "false") and without node affinity, it adds the default policy's four
// preferred terms and the netqos.io/injected annotation, as a JSONPatch; every other pod is
// allowed unchanged. It never rejects. Only what the scale-up's pods need: not a second policy
// engine.
//
//	gowebhook -addr 127.0.0.1:PORT -cert tls.crt -key tls.key [-http2]
package main

import (
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"flag"
	"io"
	"log"
	"net/http"
	"time"
)

type review struct {
	APIVersion string          `json:"apiVersion"`
	Kind       string          `json:"kind"`
	Request    *request        `json:"request"`
	Response   json.RawMessage `json:"response,omitempty"`
}

type request struct {
	UID    string `json:"uid"`
	Object struct {
		Metadata struct {
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
		Spec struct {
			Affinity map[string]json.RawMessage `json:"affinity"`
		} `json:"spec"`
	} `json:"object"`
}

var terms = []map[string]any{
	{"weight": 90, "preference": map[string]any{"matchExpressions": []map[string]any{{"key": "net", "operator": "In", "values": []string{"high"}}}}},
	{"weight": 10, "preference": map[string]any{"matchExpressions": []map[string]any{{"key": "net", "operator": "NotIn", "values": []string{"low"}}}}},
	{"weight": 100, "preference": map[string]any{"matchExpressions": []map[string]any{{"key": "net", "operator": "Exists"}}}},
	{"weight": 100, "preference": map[string]any{"matchExpressions": []map[string]any{{"key": "net", "operator": "DoesNotExist"}}}},
}

func patch(r *request) []map[string]any {
	meta := r.Object.Metadata
	if meta.Labels["qos"] != "latency-sensitive" || meta.Annotations["netqos.io/inject"] == "false" || r.Object.Spec.Affinity != nil {
		return nil
	}
	ops := []map[string]any{{"op": "add", "path": "/spec/affinity", "value": map[string]any{
		"nodeAffinity": map[string]any{"preferredDuringSchedulingIgnoredDuringExecution": terms}}}}
	if meta.Annotations == nil {
		ops = append(ops, map[string]any{"op": "add", "path": "/metadata/annotations", "value": map[string]string{}})
	}
	return append(ops, map[string]any{"op": "add", "path": "/metadata/annotations/netqos.io~1injected", "value": "netqos"})
}

func mutate(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, 3<<20))
	var in review
	if err == nil {
		err = json.Unmarshal(body, &in)
	}
	if err != nil || in.Request == nil {
		http.Error(w, `{"message":"not an AdmissionReview"}`, http.StatusBadRequest)
		return
	}
	response := map[string]any{"uid": in.Request.UID, "allowed": true}
	if ops := patch(in.Request); ops != nil {
		encoded, _ := json.Marshal(ops)
		response["patchType"] = "JSONPatch"
		response["patch"] = base64.StdEncoding.EncodeToString(encoded)
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"apiVersion": in.APIVersion, "kind": in.Kind, "response": response})
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8443", "listen address")
	cert := flag.String("cert", "tls.crt", "serving certificate (PEM)")
	key := flag.String("key", "tls.key", "private key (PEM)")
	http2 := flag.Bool("http2", false, "also offer HTTP/2 (the API server uses it only for a loopback URL)")
	flag.Parse()
	mux := http.NewServeMux()
	mux.HandleFunc("/mutate", mutate)
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	server := &http.Server{Addr: *addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	if !*http2 {
		// A non-nil empty map turns net/http's HTTP/2 off: the API server calls a webhook
		// registered by Service, or by a URL that is not loopback, over HTTP/1.1 only
		// (k8s.io/apiserver pkg/util/webhook/client.go, NextProtos http/1.1), so that is what
		// netqos-webhook (HTTP/1.1 only) is compared under.
		server.TLSNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){}
	}
	log.Fatal(server.ListenAndServeTLS(*cert, *key))
}
