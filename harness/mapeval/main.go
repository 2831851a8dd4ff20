// Command mapeval runs MutatingAdmissionPolicies over pods with the API server's own code: the CEL
// environment, compiler, matchConditions matcher and JSON patcher of k8s.io/apiserver, configured
// as kube-apiserver configures them, so the tests compare the webhook with what a real API server
// does rather than with a second implementation of ours.
//
// Input (stdin, JSON): {"policies": [MutatingAdmissionPolicy...], "pods": [Pod...]}; the policies
// run in the order given (the API server keeps no order between policies; the tests try every
// order). Output (stdout, JSON): per policy its compile errors, and per pod the pod as the API
// server encodes it before admission, the pod after every policy and one reinvocation round, and
// the errors the API server would report (a policy error with failurePolicy Ignore is admitted
// unchanged, so the pod is what it was before that policy).
//
// What it reproduces, with the file it follows (k8s.io/apiserver v0.36.3):
//   - compilation: pkg/admission/plugin/policy/mutating/compilation.go (compilePolicy), the base
//     environment of environment.DefaultCompatibilityVersion(), variables, matchConditions and the
//     JSONPatch expression's exact return type list(JSONPatch);
//   - dispatch: pkg/admission/plugin/policy/mutating/dispatcher.go (dispatchInvocations,
//     dispatchOne): the objectSelector, the matcher, the patcher with RuntimeCELCostBudget, and the
//     reinvocation of IfNeeded policies after a change (reinvocationcontext.go);
//   - the patch: pkg/admission/plugin/policy/mutating/patch/json_patch.go, which encodes the typed
//     pod, applies the JSON patch with evanphx/json-patch and decodes the result strictly.
// Not reproduced: namespaceSelector (the e2e tests use the real API server for that), defaulting
// after a patch (the Pod defaults touch no field the policies write).
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	jsonserializer "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/mutating/patch"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/cel/environment"
)

type input struct {
	Policies []admissionregistrationv1.MutatingAdmissionPolicy `json:"policies"`
	Pods     []json.RawMessage                                  `json:"pods"`
}

type podResult struct {
	Before      json.RawMessage `json:"before,omitempty"`
	After       json.RawMessage `json:"after,omitempty"`
	Errors      []string        `json:"errors"`
	Invocations []string        `json:"invocations"`
	Reinvoked   bool            `json:"reinvoked"`
}

type output struct {
	CompileErrors map[string][]string `json:"compileErrors"`
	Pods          []podResult         `json:"pods"`
}

type compiled struct {
	policy   *admissionregistrationv1.MutatingAdmissionPolicy
	selector labels.Selector
	matcher  matchconditions.Matcher
	patchers []patch.Patcher
	compiler *plugincel.CompositedCompiler
	errors   []string
}

var (
	podKind     = schema.GroupVersionKind{Version: "v1", Kind: "Pod"}
	podResource = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
)

// compile follows compilePolicy (mutating/compilation.go) line for line, keeping the errors the
// API server would only report at admission time.
func compile(p *admissionregistrationv1.MutatingAdmissionPolicy) *compiled {
	c := &compiled{policy: p}
	opts := plugincel.OptionalVariableDeclarations{HasParams: p.Spec.ParamKind != nil, HasAuthorizer: true}
	compiler, err := plugincel.NewCompositedCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
	if err != nil {
		c.errors = append(c.errors, err.Error())
		return c
	}
	c.compiler = compiler
	var variables []plugincel.NamedExpressionAccessor
	for _, v := range p.Spec.Variables {
		variables = append(variables, &validating.Variable{Name: v.Name, Expression: v.Expression})
	}
	compiler.CompileAndStoreVariables(variables, opts, environment.StoredExpressions)
	if len(p.Spec.MatchConditions) > 0 {
		accessors := make([]plugincel.ExpressionAccessor, len(p.Spec.MatchConditions))
		for i := range p.Spec.MatchConditions {
			accessors[i] = (*matchconditions.MatchCondition)(&p.Spec.MatchConditions[i])
		}
		evaluator := compiler.CompileCondition(accessors, opts, environment.StoredExpressions)
		for _, e := range evaluator.CompilationErrors() {
			c.errors = append(c.errors, "matchCondition: "+e.Error())
		}
		c.matcher = matchconditions.NewMatcher(evaluator, p.Spec.FailurePolicy, "policy", "validate", p.Name)
	}
	patchOptions := opts
	patchOptions.HasPatchTypes = true
	for i, m := range p.Spec.Mutations {
		if m.PatchType != admissionregistrationv1.PatchTypeJSONPatch || m.JSONPatch == nil {
			c.errors = append(c.errors, fmt.Sprintf("mutations[%d]: not a JSONPatch mutation", i))
			continue
		}
		accessor := &patch.JSONPatchCondition{Expression: m.JSONPatch.Expression}
		evaluator := compiler.CompileMutatingEvaluator(accessor, patchOptions, environment.StoredExpressions)
		for _, e := range evaluator.CompilationErrors() {
			c.errors = append(c.errors, fmt.Sprintf("mutations[%d]: %v", i, e))
		}
		c.patchers = append(c.patchers, patch.NewJSONPatcher(evaluator))
	}
	// Variables are compiled lazily into the composited environment; their errors surface when
	// an expression that uses them runs, as in the API server.
	selector, err := metav1.LabelSelectorAsSelector(p.Spec.MatchConstraints.ObjectSelector)
	if err != nil {
		c.errors = append(c.errors, "objectSelector: "+err.Error())
		selector = labels.Nothing()
	}
	c.selector = selector
	return c
}

func main() {
	var in input
	decoder := json.NewDecoder(os.Stdin)
	decoder.DisallowUnknownFields()
	if err := decoder.Decode(&in); err != nil {
		fmt.Fprintln(os.Stderr, "mapeval: reading the input:", err)
		os.Exit(2)
	}
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		panic(err)
	}
	interfaces := admission.NewObjectInterfacesFromScheme(scheme)
	strict := jsonserializer.NewSerializerWithOptions(jsonserializer.DefaultMetaFactory, scheme, scheme, jsonserializer.SerializerOptions{Strict: true})

	out := output{CompileErrors: map[string][]string{}, Pods: []podResult{}}
	var policies []*compiled
	for i := range in.Policies {
		c := compile(&in.Policies[i])
		out.CompileErrors[c.policy.Name] = append([]string{}, c.errors...)
		policies = append(policies, c)
	}
	namespace := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default", Labels: map[string]string{"kubernetes.io/metadata.name": "default"}}}
	for _, raw := range in.Pods {
		out.Pods = append(out.Pods, admit(raw, policies, strict, interfaces, namespace))
	}
	encoder := json.NewEncoder(os.Stdout)
	if err := encoder.Encode(out); err != nil {
		fmt.Fprintln(os.Stderr, "mapeval: writing the output:", err)
		os.Exit(1)
	}
}

func admit(raw json.RawMessage, policies []*compiled, strict runtime.Serializer, o admission.ObjectInterfaces, ns *corev1.Namespace) (result podResult) {
	result.Errors, result.Invocations = []string{}, []string{}
	defer func() {
		// A panic here is what the API server would do with this pod (kubernetes#139032).
		if r := recover(); r != nil {
			result.Errors = append(result.Errors, fmt.Sprintf("panic: %v", r))
		}
	}()
	obj, _, err := strict.Decode(raw, &podKind, &corev1.Pod{})
	if err != nil {
		result.Errors = append(result.Errors, "decode: "+err.Error())
		return result
	}
	pod := obj.(*corev1.Pod)
	pod.SetGroupVersionKind(podKind)
	result.Before = encode(strict, pod)
	attributes := admission.NewAttributesRecord(pod, nil, podKind, pod.Namespace, pod.Name, podResource, "", admission.Create, &metav1.CreateOptions{}, false, &user.DefaultInfo{Name: "netqos-test"})
	versioned := &admission.VersionedAttributes{Attributes: attributes, VersionedKind: podKind, VersionedObject: pod}

	changed := dispatch(policies, versioned, o, ns, &result)
	if changed {
		// reinvocationcontext.go: after a change, policies with reinvocationPolicy IfNeeded run once more.
		result.Reinvoked = true
		var again []*compiled
		for _, c := range policies {
			if c.policy.Spec.ReinvocationPolicy == admissionregistrationv1.IfNeededReinvocationPolicy {
				again = append(again, c)
			}
		}
		if dispatch(again, versioned, o, ns, &result) {
			result.Errors = append(result.Errors, "reinvocation changed the pod again: the mutation is not idempotent")
		}
	}
	result.After = encode(strict, versioned.VersionedObject)
	return result
}

// dispatch runs each policy whose objectSelector and matchConditions select the pod, as
// dispatchInvocations does; it reports whether any changed the pod.
func dispatch(policies []*compiled, versioned *admission.VersionedAttributes, o admission.ObjectInterfaces, ns *corev1.Namespace, result *podResult) bool {
	changedAny := false
	for _, c := range policies {
		if len(c.errors) > 0 || c.compiler == nil {
			result.Errors = append(result.Errors, c.policy.Name+": not compiled")
			continue
		}
		pod := versioned.VersionedObject.(*corev1.Pod)
		if !c.selector.Matches(labels.Set(pod.Labels)) {
			continue
		}
		ctx := c.compiler.CreateContext(context.Background())
		if c.matcher != nil {
			match := c.matcher.Match(ctx, versioned, nil, nil)
			if match.Error != nil {
				result.Errors = append(result.Errors, c.policy.Name+": matchConditions: "+match.Error.Error())
				continue
			}
			if !match.Matches {
				continue
			}
		}
		result.Invocations = append(result.Invocations, c.policy.Name)
		before := versioned.VersionedObject
		for i, patcher := range c.patchers {
			request := patch.Request{
				MatchedResource:     podResource,
				VersionedAttributes: versioned,
				ObjectInterfaces:    o,
				OptionalVariables:   plugincel.OptionalVariableBindings{},
				Namespace:           ns,
			}
			patched, err := patcher.Patch(ctx, request, celconfig.RuntimeCELCostBudget)
			if err != nil {
				result.Errors = append(result.Errors, fmt.Sprintf("%s: mutations[%d]: %v", c.policy.Name, i, err))
				continue
			}
			versioned.VersionedObject = patched
			versioned.Dirty = true
		}
		if !apiequality.Semantic.DeepEqual(before, versioned.VersionedObject) {
			changedAny = true
		}
	}
	return changedAny
}

func encode(s runtime.Serializer, obj runtime.Object) json.RawMessage {
	b, err := runtime.Encode(s, obj)
	if err != nil {
		panic(err)
	}
	return b
}
