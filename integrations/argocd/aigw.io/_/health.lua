-- Argo CD health of every aigw.io kind: one script for the group, installed as Argo CD's
-- resource_customizations/aigw.io/_/health.lua or as the argocd-cm key
-- resource.customizations.health.aigw.io_* (integrations/argocd/argocd-cm.yaml); for an Argo CD
-- without wildcard keys, `aigw argocd-cm --per-kind` prints the same script under one key per kind.
--
-- aigw writes kstatus conditions (Ready, Reconciling, Stalled, each with its own
-- observedGeneration) plus, on every kind but Connection, Paused and Drifted. The order below
-- follows kstatus: a status that describes an older generation says nothing about the current
-- spec, so it is Progressing even when it was Stalled. Drifted is informational (observe-only
-- mode): still Healthy. A Connection is never paused (aigw.io/paused does not apply to it).
--
-- Argo CD runs argocd-cm scripts without Lua's string library: only base and table are used.
local hs = {}

local function find(conditions, kind)
  for _, c in ipairs(conditions) do
    if c.type == kind then
      return c
    end
  end
  return nil
end

local function is_true(c)
  return c ~= nil and c.status == "True"
end

local function text(c, fallback)
  if c ~= nil and c.message ~= nil and c.message ~= "" then
    return c.message
  end
  if c ~= nil and c.reason ~= nil and c.reason ~= "" then
    return c.reason
  end
  return fallback
end

local annotations = obj.metadata.annotations or {}
local status = obj.status
local conditions = {}
if status ~= nil and status.conditions ~= nil then
  conditions = status.conditions
end

local paused = find(conditions, "Paused")
if obj.kind ~= "Connection" and (is_true(paused) or annotations["aigw.io/paused"] == "true") then
  hs.status = "Suspended"
  hs.message = text(paused, "aigw.io/paused is set: aigw makes no API calls")
  return hs
end

if status == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for aigw to report a status"
  return hs
end

local generation = obj.metadata.generation
local observed = status.observedGeneration
if generation ~= nil and (observed == nil or observed < generation) then
  hs.status = "Progressing"
  hs.message = "Waiting for aigw to observe generation " .. tostring(generation)
  return hs
end

-- kstatus's abnormal-true conditions, worst first: Stalled is Degraded, Reconciling Progressing.
for _, abnormal in ipairs({ { "Stalled", "Degraded" }, { "Reconciling", "Progressing" } }) do
  local condition = find(conditions, abnormal[1])
  if is_true(condition) then
    hs.status = abnormal[2]
    hs.message = text(condition, abnormal[1])
    return hs
  end
end

local ready = find(conditions, "Ready")
if is_true(ready) then
  hs.status = "Healthy"
  hs.message = text(ready, "Ready")
  local drifted = find(conditions, "Drifted")
  if is_true(drifted) then
    hs.message = hs.message .. "; drifted: " .. text(drifted, "the remote object differs from the spec")
  end
  return hs
end

hs.status = "Progressing"
hs.message = text(ready, "Waiting for aigw to report Ready")
return hs
