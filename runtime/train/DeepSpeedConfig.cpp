//===- DeepSpeedConfig.cpp - a DeepSpeed config, read for ztc -------------===//
//
// One reader per section, each consuming the keys it knows; a key no reader
// consumes is a notice. Defaults are DeepSpeed's (deepspeed/runtime/
// config.py, lr_schedules.py, zero/config.py), so a config means here what
// it means there.
//
//===----------------------------------------------------------------------===//

#include "runtime/train/DeepSpeedConfig.h"

#include "runtime/Error.h"
#include "runtime/io/Hjson.h"
#include "runtime/train/DeepSpeedKeys.h"
#include "runtime/io/File.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <set>

namespace ztc::rt {

namespace {

using json = nlohmann::json;

/// A number as a flag takes it: integers without a fraction, others in the
/// shortest form that reads back to the same double.
std::string flagNumber(double value) {
  if (std::floor(value) == value && std::fabs(value) < 1e15)
    return std::to_string(static_cast<int64_t>(value));
  return json(value).dump();
}

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  return text;
}

class Reader {
public:
  Reader(const std::string &path, DeepSpeedConfig &out)
      : path_(path), out_(out) {}

  void read(const json &root) {
    if (!root.is_object())
      fail("", "expects a JSON object at the top, got " + kind(root));
    Keys keys(*this, root, "");
    for (const char *key :
         {"train_batch_size", "train_micro_batch_size_per_gpu",
          "gradient_accumulation_steps"}) {
      if (!keys.take(key))
        continue;
      BatchTerm &term = std::string(key) == "train_batch_size"
                            ? out_.trainBatchSize
                        : std::string(key) == "gradient_accumulation_steps"
                            ? out_.gradAccumSteps
                            : out_.microBatchSize;
      term.given = true;
      term.isAuto = isAuto(root[key]);
      if (!term.isAuto)
        term.value = count(root[key], key, /*minimum=*/1);
    }
    // DeepSpeed 0.19 clips at 1.0 unless told otherwise (0: no clipping).
    if (keys.take("gradient_clipping"))
      setNumber("clip-grad-norm", root["gradient_clipping"],
                "gradient_clipping");
    else
      setDefault("clip-grad-norm", "1", "gradient_clipping");
    if (keys.take("steps_per_print"))
      out_.stepsPerPrint = count(root["steps_per_print"], "steps_per_print", 1);
    if (keys.take("optimizer"))
      optimizer(root["optimizer"]);
    if (keys.take("scheduler"))
      scheduler(root["scheduler"]);
    precision(root, keys);
    if (keys.take("communication_data_type"))
      communicationType(root["communication_data_type"]);
    if (keys.take("data_types"))
      dataTypes(root["data_types"]);
    if (keys.take("zero_optimization"))
      zero(root["zero_optimization"]);
    if (keys.take("activation_checkpointing"))
      activationCheckpointing(root["activation_checkpointing"]);
    keys.reportRest("not a key of DeepSpeed 0.19's config (DeepSpeed ignores "
                    "it too: a misspelling?); ignored");
  }

private:
  /// The keys of one object, each taken once; reportRest notes the others.
  class Keys {
  public:
    Keys(Reader &reader, const json &object, std::string prefix)
        : reader_(reader), object_(object), prefix_(std::move(prefix)) {}
    bool take(const std::string &key) {
      if (!object_.contains(key))
        return false;
      taken_.insert(key);
      return true;
    }
    /// The keys no reader took: those of DeepSpeedKeys.cpp say what they
    /// say there, the others are reported with `why`, as an error in the
    /// sections DeepSpeed validates (`strict`: it refuses keys it does not
    /// define there), else as a warning.
    void reportRest(const std::string &why, bool strict = false) {
      std::string section =
          prefix_.empty() ? "" : prefix_.substr(0, prefix_.size() - 1);
      for (auto it = object_.begin(); it != object_.end(); ++it)
        if (!taken_.count(it.key()) &&
            !reader_.knownKey(section, it.key(), it.value()))
          reader_.notice(strict, prefix_ + it.key(), why);
    }

  private:
    Reader &reader_;
    const json &object_;
    std::string prefix_;
    std::set<std::string> taken_;
  };

  [[noreturn]] void fail(const std::string &key, const std::string &message) {
    throw Error(path_ + ": " + (key.empty() ? "" : printable(key) + ": ") +
                message);
  }

  void notice(bool error, const std::string &key, const std::string &message) {
    out_.notices.push_back({error, key, message});
  }
  void note(const std::string &key, const std::string &message) {
    out_.notices.push_back({false, key, message, /*note=*/true});
  }

  /// Whether `value` leaves a key at what DeepSpeed does by default
  /// (DeepSpeedKey::quietWhen), so that it needs no word.
  static bool quiet(const json &value, const std::string &quietWhen) {
    if (value.is_null() || isAuto(value))
      return true;
    if (quietWhen == "off")
      return (value.is_boolean() && !value.get<bool>()) ||
             (value.is_object() &&
              (value.empty() ||
               (value.contains("enabled") && value["enabled"].is_boolean() &&
                !value["enabled"].get<bool>())));
    if (quietWhen.empty())
      return false;
    json fallback = json::parse(quietWhen, nullptr, /*allow_exceptions=*/false);
    if (fallback.is_number() && value.is_number())
      return fallback.get<double>() == value.get<double>();
    return fallback == value;
  }

  /// A key of DeepSpeed's that no reader took: the notice its entry in
  /// DeepSpeedKeys.cpp asks for, and true; false when DeepSpeed has no such
  /// key.
  bool knownKey(const std::string &section, const std::string &key,
                const json &value) {
    const DeepSpeedKey *entry = findDeepSpeedKey(section, key);
    if (!entry)
      return false;
    if (entry->use == KeyUse::Read || quiet(value, entry->quietWhen))
      return true;
    std::string name = section.empty() ? key : section + "." + key;
    switch (entry->use) {
    case KeyUse::Note:
      note(name, std::string("accepted (") + entry->why + ")");
      break;
    case KeyUse::Warn:
      notice(false, name, std::string("not built (") + entry->why +
                              "); ignored");
      break;
    case KeyUse::Refuse:
      notice(true, name, std::string("is not built (") + entry->why + ")");
      break;
    case KeyUse::Read:
      break;
    }
    return true;
  }

  static std::string kind(const json &value) {
    if (value.is_string())
      return "the string " + printable(value.dump(), 40);
    return std::string(value.type_name()) + " " + printable(value.dump(), 40);
  }

  static bool isAuto(const json &value) {
    return value.is_string() && value.get<std::string>() == "auto";
  }

  static bool enabledIn(const json &section) {
    return section.is_object() && section.contains("enabled") &&
           section["enabled"].is_boolean() && section["enabled"].get<bool>();
  }

  double number(const json &value, const std::string &key) {
    if (!value.is_number())
      fail(key, "expects a number or \"auto\", got " + kind(value));
    double number = value.get<double>();
    if (!std::isfinite(number) || number < 0)
      fail(key, "expects a finite non-negative number, got " + value.dump());
    return number;
  }

  uint64_t count(const json &value, const std::string &key,
                 uint64_t minimum = 0) {
    // 5e8 is how configs often write bucket sizes.
    if (!value.is_number() ||
        value.get<double>() != std::floor(value.get<double>()))
      fail(key, "expects a whole number, got " + kind(value));
    double number = value.get<double>();
    if (number < double(minimum) || number > 9e18)
      fail(key, "expects a whole number of at least " +
                    std::to_string(minimum) + ", got " + value.dump());
    return static_cast<uint64_t>(number);
  }

  bool boolean(const json &value, const std::string &key) {
    if (!value.is_boolean())
      fail(key, "expects true or false, got " + kind(value));
    return value.get<bool>();
  }

  std::string text(const json &value, const std::string &key) {
    if (!value.is_string())
      fail(key, "expects a string, got " + kind(value));
    return value.get<std::string>();
  }

  void add(const std::string &flag, std::string value, const std::string &key,
           const std::string &shown, ConfigSource source,
           const std::string &appliesWith = "") {
    out_.settings.push_back(
        {flag, std::move(value), key, shown, source, appliesWith});
  }
  void addAuto(const std::string &flag, const std::string &key) {
    add(flag, "", key, "\"auto\"", ConfigSource::Auto);
  }
  void setNumber(const std::string &flag, const json &value,
                 const std::string &key, const std::string &appliesWith = "") {
    if (isAuto(value))
      return addAuto(flag, key);
    add(flag, flagNumber(number(value, key)), key, value.dump(),
        ConfigSource::Explicit, appliesWith);
  }
  void setCount(const std::string &flag, const json &value,
                const std::string &key, uint64_t minimum = 0,
                const std::string &appliesWith = "") {
    if (isAuto(value))
      return addAuto(flag, key);
    add(flag, std::to_string(count(value, key, minimum)), key, value.dump(),
        ConfigSource::Explicit, appliesWith);
  }
  void setDefault(const std::string &flag, const std::string &value,
                  const std::string &key, const std::string &appliesWith = "") {
    add(flag, value, key, value + " (DeepSpeed's default)",
        ConfigSource::Default, appliesWith);
  }

  /// A section of the form {"type": ..., "params": {...}} (`name` is
  /// "optimizer" or "scheduler"; `types` lists the types ztc knows, for the
  /// message when there is none): its type and its params.
  std::pair<std::string, json> typedSection(const json &section,
                                            const std::string &name,
                                            const std::string &types) {
    if (!section.is_object())
      fail(name, "expects an object {\"type\": ..., \"params\": {...}}, "
                 "got " +
                     kind(section));
    Keys keys(*this, section, name + ".");
    if (!keys.take("type"))
      fail(name, "has no \"type\" (" + types + ")");
    std::string type = text(section["type"], name + ".type");
    json params = json::object();
    if (keys.take("params")) {
      params = section["params"];
      if (!params.is_object())
        fail(name + ".params", "expects an object, got " + kind(params));
    }
    keys.reportRest("not a key of DeepSpeed's " + name + " section; ignored");
    return {type, params};
  }

  // --- optimizer -------------------------------------------------------
  void optimizer(const json &section) {
    auto [type, params] =
        typedSection(section, "optimizer", "Adam, AdamW or SGD");
    Keys given(*this, params, "optimizer.params.");
    std::string name = lower(type);
    std::string optimizer;
    if (name == "adam") {
      // DeepSpeed's Adam is AdamW unless adam_w_mode is false.
      bool decoupled = true;
      if (given.take("adam_w_mode"))
        decoupled =
            boolean(params["adam_w_mode"], "optimizer.params.adam_w_mode");
      optimizer = decoupled ? "adamw" : "adam";
      given.take("torch_adam");
    } else if (name == "adamw") {
      optimizer = "adamw";
      given.take("torch_adam");
    } else if (name == "sgd") {
      optimizer = "sgd";
    } else {
      notice(true, "optimizer.type",
             "'" + printable(type) +
                 "' is not built: ztc compiles Adam, AdamW (DeepSpeed's Adam "
                 "with adam_w_mode) and SGD");
      return;
    }
    optimizerName_ = optimizer;
    add("optimizer", optimizer, "optimizer.type", "\"" + type + "\"",
        ConfigSource::Explicit);
    const std::string prefix = "optimizer.params.";
    // The scheduler's peak replaces the optimizer's lr (see scheduler()).
    if (given.take("lr") && !isAuto(params["lr"]))
      optimizerLr_ = number(params["lr"], prefix + "lr");
    else if (params.contains("lr"))
      optimizerLrAuto_ = true;
    if (given.take("weight_decay"))
      setNumber("weight-decay", params["weight_decay"],
                prefix + "weight_decay");
    else
      setDefault("weight-decay", "0", prefix + "weight_decay");
    if (optimizer == "sgd") {
      if (given.take("momentum"))
        setNumber("momentum", params["momentum"], prefix + "momentum");
      if (given.take("nesterov")) {
        bool nesterov = boolean(params["nesterov"], prefix + "nesterov");
        add("nesterov", nesterov ? "true" : "false", prefix + "nesterov",
            params["nesterov"].dump(), ConfigSource::Explicit);
      }
      if (given.take("dampening") &&
          number(params["dampening"], prefix + "dampening") != 0)
        notice(true, prefix + "dampening",
               "is not built: ztc's SGD has no dampening (0)");
    } else {
      if (given.take("betas")) {
        const json &betas = params["betas"];
        if (isAuto(betas)) {
          addAuto("betas", prefix + "betas");
        } else {
          if (!betas.is_array() || betas.size() != 2)
            fail(prefix + "betas",
                 "expects two numbers [B1, B2], got " + kind(betas));
          add("betas",
              flagNumber(number(betas[0], prefix + "betas")) + "," +
                  flagNumber(number(betas[1], prefix + "betas")),
              prefix + "betas", betas.dump(), ConfigSource::Explicit);
        }
      }
      if (given.take("eps"))
        setNumber("eps", params["eps"], prefix + "eps");
      if (given.take("amsgrad") &&
          boolean(params["amsgrad"], prefix + "amsgrad"))
        notice(true, prefix + "amsgrad",
               "is not built: ztc's Adam keeps no "
               "maximum of the second moment");
      if (given.take("bias_correction") &&
          !boolean(params["bias_correction"], prefix + "bias_correction"))
        notice(true, prefix + "bias_correction",
               "false is not built: ztc's Adam always corrects the bias, as "
               "PyTorch's does");
    }
    given.reportRest("not a parameter ztc's " + optimizer + " takes; ignored");
  }

  // --- scheduler -------------------------------------------------------
  void scheduler(const json &section) {
    // Named variables, not a structured binding: the lambdas below
    // capture them (C++17 cannot capture a binding).
    std::string type;
    json params;
    std::tie(type, params) = typedSection(section, "scheduler",
                                          "WarmupLR, WarmupDecayLR, "
                                          "WarmupCosineLR, OneCycle or "
                                          "LRRangeTest");
    Keys given(*this, params, "scheduler.params.");
    const std::string prefix = "scheduler.params.";
    given.take("last_batch_iteration");
    auto number = [&](const char *key, const char *flag,
                      std::optional<double> fallback) {
      if (given.take(key))
        return setNumber(flag, params[key], prefix + key);
      if (fallback)
        setDefault(flag, flagNumber(*fallback), prefix + key);
      else
        fail(prefix + key, "is required by " + type);
    };
    auto steps = [&](const char *key, const char *flag, uint64_t fallback,
                     uint64_t minimum = 0) {
      if (given.take(key))
        return setCount(flag, params[key], prefix + key, minimum);
      setDefault(flag, std::to_string(fallback), prefix + key);
    };
    auto warmupType = [&] {
      if (!given.take("warmup_type"))
        return setDefault("warmup-type", "log", prefix + "warmup_type");
      std::string value = text(params["warmup_type"], prefix + "warmup_type");
      if (value != "log" && value != "linear")
        fail(prefix + "warmup_type",
             "expects \"log\" or \"linear\", got \"" + printable(value) + "\"");
      add("warmup-type", value, prefix + "warmup_type", "\"" + value + "\"",
          ConfigSource::Explicit);
    };
    std::string kind;
    if (type == "WarmupLR" || type == "WarmupDecayLR") {
      kind = type == "WarmupLR" ? "warmup" : "warmup-decay";
      number("warmup_min_lr", "min-lr", 0.0);
      // DeepSpeed 0.19's WarmupLR without warmup_max_lr warms up to the
      // optimizer's lr; WarmupDecayLR's default is 0.001.
      if (type == "WarmupLR" && !params.contains("warmup_max_lr"))
        optimizerLrIsPeak_ = true;
      else
        number("warmup_max_lr", "lr", 0.001);
      // DeepSpeed refuses a warmup of 0 steps (1 warms up over 2).
      steps("warmup_num_steps", "warmup-steps", 1000, 1);
      warmupType();
      if (kind == "warmup-decay") {
        if (!given.take("total_num_steps"))
          fail(prefix + "total_num_steps", "is required by WarmupDecayLR "
                                           "(or \"auto\": the run's length)");
        setCount("total-steps", params["total_num_steps"],
                 prefix + "total_num_steps", 1);
      }
    } else if (type == "WarmupCosineLR") {
      kind = "warmup-cosine";
      if (!given.take("total_num_steps"))
        fail(prefix + "total_num_steps", "is required by WarmupCosineLR (or "
                                         "\"auto\": the run's length)");
      setCount("total-steps", params["total_num_steps"],
               prefix + "total_num_steps", 1);
      number("warmup_min_ratio", "warmup-min-ratio", 0.0);
      number("cos_min_ratio", "cos-min-ratio", 0.0001);
      steps("warmup_num_steps", "warmup-steps", 1000, 1);
      warmupType();
      optimizerLrIsPeak_ = true;
    } else if (type == "OneCycle") {
      kind = "one-cycle";
      number("cycle_min_lr", "min-lr", std::nullopt);
      number("cycle_max_lr", "lr", std::nullopt);
      number("decay_lr_rate", "decay-lr-rate", 0.0);
      steps("cycle_first_step_size", "cycle-first-step-size", 2000, 1);
      if (given.take("cycle_second_step_size") &&
          !params["cycle_second_step_size"].is_null())
        setCount("cycle-second-step-size", params["cycle_second_step_size"],
                 prefix + "cycle_second_step_size", 1);
      steps("decay_step_size", "decay-step-size", 0);
      // DeepSpeed: a second stair count of None is the first's, which the
      // flag's default does too.
      if (given.take("cycle_first_stair_count") &&
          !params["cycle_first_stair_count"].is_null())
        setCount("cycle-first-stair-count", params["cycle_first_stair_count"],
                 prefix + "cycle_first_stair_count");
      if (given.take("cycle_second_stair_count") &&
          !params["cycle_second_stair_count"].is_null())
        setCount("cycle-second-stair-count",
                 params["cycle_second_stair_count"],
                 prefix + "cycle_second_stair_count");
      bool cycleMomentum = true;
      if (given.take("cycle_momentum"))
        cycleMomentum =
            boolean(params["cycle_momentum"], prefix + "cycle_momentum");
      for (const char *momentum :
           {"cycle_min_mom", "cycle_max_mom", "decay_mom_rate"})
        given.take(momentum);
      // DeepSpeed cycles beta1 only for optimizers with betas.
      if (cycleMomentum && optimizerName_ != "sgd")
        notice(true, prefix + "cycle_momentum",
               "true (DeepSpeed's default) cycles Adam's beta1 every step; "
               "ztc compiles the betas into the step: set \"cycle_momentum\": "
               "false, or use SGD");
    } else if (type == "LRRangeTest") {
      kind = "lr-range-test";
      number("lr_range_test_min_lr", "lr", 0.001);
      steps("lr_range_test_step_size", "lr-range-test-step-size", 2000, 1);
      number("lr_range_test_step_rate", "lr-range-test-step-rate", 1.0);
      if (given.take("lr_range_test_staircase")) {
        bool staircase = boolean(params["lr_range_test_staircase"],
                                 prefix + "lr_range_test_staircase");
        add("lr-range-test-staircase", staircase ? "true" : "false",
            prefix + "lr_range_test_staircase",
            params["lr_range_test_staircase"].dump(), ConfigSource::Explicit);
      }
    } else {
      notice(true, "scheduler.type",
             "'" + printable(type) +
                 "' is not built: ztc has WarmupLR, WarmupDecayLR, "
                 "WarmupCosineLR, OneCycle and LRRangeTest");
      return;
    }
    add("lr-schedule", kind, "scheduler.type", "\"" + type + "\"",
        ConfigSource::Explicit);
    hasScheduler_ = true;
    given.reportRest("not a parameter of " + type + "; ignored");
  }

  // --- fp16, bf16 ------------------------------------------------------
  void precision(const json &root, Keys &keys) {
    bool fp16 = false, bf16 = false;
    if (keys.take("fp16"))
      fp16 = fp16Section(root["fp16"]);
    for (const char *name : {"bf16", "bfloat16"}) {
      if (!keys.take(name))
        continue;
      const json &section = root[name];
      if (!section.is_object())
        fail(name,
             "expects an object {\"enabled\": ...}, got " + kind(section));
      Keys bfKeys(*this, section, std::string(name) + ".");
      if (bfKeys.take("enabled")) {
        const json &enabled = section["enabled"];
        if (isAuto(enabled))
          addAuto("precision", std::string(name) + ".enabled");
        else if (boolean(enabled, std::string(name) + ".enabled"))
          bf16 = true;
      }
      bfKeys.reportRest("not a key of DeepSpeed's bf16 section, which "
                        "DeepSpeed 0.19 refuses too (a misspelling?)",
                        /*strict=*/true);
    }
    if (fp16 && bf16)
      fail("fp16.enabled", "and bf16.enabled are both true: choose one, as "
                           "DeepSpeed requires");
    if (bf16)
      add("precision", "bf16", "bf16.enabled", "true", ConfigSource::Explicit);
    if (fp16)
      add("precision", "fp16", "fp16.enabled", "true", ConfigSource::Explicit);
    if (keys.take("amp") && enabledIn(root["amp"]))
      notice(true, "amp",
             "NVIDIA Apex's amp is not built (and was removed from DeepSpeed "
             "itself in 0.19): use \"fp16\" or \"bf16\" (--precision "
             "fp16|bf16), ztc's own mixed precision");
  }

  /// Reads the fp16 section; returns whether it is on (true, not "auto").
  bool fp16Section(const json &section) {
    if (!section.is_object())
      fail("fp16",
           "expects an object {\"enabled\": ...}, got " + kind(section));
    Keys keys(*this, section, "fp16.");
    bool enabled = false, automatic = false;
    if (keys.take("enabled")) {
      automatic = isAuto(section["enabled"]);
      if (automatic)
        addAuto("precision", "fp16.enabled");
      else
        enabled = boolean(section["enabled"], "fp16.enabled");
    }
    // DeepSpeed reads the loss-scale keys only when fp16 is on; with
    // "auto", only if the flags make it fp16.
    std::string when = automatic ? "fp16" : "";
    bool on = enabled || automatic;
    const std::string prefix = "fp16.";
    struct Key {
      const char *key, *flag;
      bool whole;
    } loss[] = {{"loss_scale", "loss-scale", false},
                {"initial_scale_power", "initial-scale-power", true},
                {"loss_scale_window", "loss-scale-window", true},
                {"hysteresis", "hysteresis", true},
                {"min_loss_scale", "min-loss-scale", false}};
    for (const Key &k : loss) {
      if (!keys.take(k.key) || !on)
        continue;
      if (k.whole)
        setCount(k.flag, section[k.key], prefix + k.key, 0, when);
      else
        setNumber(k.flag, section[k.key], prefix + k.key, when);
    }
    if (keys.take("consecutive_hysteresis") && on) {
      bool value = boolean(section["consecutive_hysteresis"],
                           prefix + "consecutive_hysteresis");
      add("consecutive-hysteresis", value ? "true" : "false",
          prefix + "consecutive_hysteresis",
          section["consecutive_hysteresis"].dump(), ConfigSource::Explicit,
          when);
    }
    if (keys.take("fp16_master_weights_and_grads") &&
        boolean(section["fp16_master_weights_and_grads"],
                prefix + "fp16_master_weights_and_grads"))
      notice(true, prefix + "fp16_master_weights_and_grads",
             "is not built: ztc keeps f32 master weights and updates them "
             "in f32");
    if (keys.take("auto_cast") &&
        boolean(section["auto_cast"], prefix + "auto_cast"))
      notice(false, prefix + "auto_cast",
             "ztc's autocast already chooses each op's type (products and "
             "convolutions in fp16, the rest in f32); ignored");
    keys.reportRest("not a key of DeepSpeed's fp16 section, which DeepSpeed "
                    "0.19 refuses too (a misspelling?)",
                    /*strict=*/true);
    return enabled;
  }

  /// A float type DeepSpeed names (fp16, bf16 or its bfp16, fp32) as the
  /// flag value, added as `flag`; `expected` words the error.
  void setFloatType(const std::string &flag, const json &value,
                    const std::string &key, const std::string &expected,
                    const std::string &appliesWith = "") {
    std::string type = text(value, key);
    std::string name = type == "fp16"                      ? "fp16"
                       : type == "bfp16" || type == "bf16" ? "bf16"
                       : type == "fp32"                    ? "fp32"
                                                           : "";
    if (name.empty())
      fail(key, "expects " + expected + ", got \"" + printable(type) + "\"");
    add(flag, name, key, "\"" + type + "\"", ConfigSource::Explicit,
        appliesWith);
  }

  void communicationType(const json &value) {
    const std::string key = "communication_data_type";
    if (value.is_null())
      return;
    if (isAuto(value))
      return addAuto("comm-dtype", key);
    setFloatType("comm-dtype", value, key,
                 "\"fp16\", \"bfp16\", \"bf16\" or \"fp32\"");
  }

  void dataTypes(const json &section) {
    if (!section.is_object())
      fail("data_types", "expects an object, got " + kind(section));
    Keys keys(*this, section, "data_types.");
    if (keys.take("grad_accum_dtype") && !section["grad_accum_dtype"].is_null())
      setFloatType("grad-accum-dtype", section["grad_accum_dtype"],
                   "data_types.grad_accum_dtype",
                   "\"fp32\", \"fp16\" or \"bf16\"", "grad-accum");
    keys.reportRest("not a key of DeepSpeed's data_types section; ignored");
  }

  // --- zero_optimization -----------------------------------------------
  /// `section` with DeepSpeed's other names for its keys (pydantic aliases
  /// and deprecated names, DeepSpeedKeys.cpp) renamed to the ones ztc reads;
  /// a key given under both names is an error, as in DeepSpeed.
  json canonicalKeys(const json &section, const std::string &name) {
    json renamed = json::object();
    std::map<std::string, std::string> written;
    for (auto it = section.begin(); it != section.end(); ++it) {
      std::string key = it.key();
      const DeepSpeedKey *entry = findDeepSpeedKey(name, key);
      if (entry && entry->alias && key == entry->alias)
        key = entry->key;
      if (renamed.contains(key))
        fail(name + "." + written[key],
             "and \"" + printable(it.key()) +
                 "\" are one key under DeepSpeed's two names: give one");
      written[key] = it.key();
      renamed[key] = it.value();
    }
    return renamed;
  }

  void zero(const json &given) {
    const std::string prefix = "zero_optimization.";
    if (given.is_boolean()) {
      // The legacy form: true is stage 1.
      bool on = given.get<bool>();
      add("zero", on ? "1" : "0", "zero_optimization", given.dump(),
          ConfigSource::Explicit);
      return;
    }
    if (!given.is_object())
      fail("zero_optimization",
           "expects an object or a boolean, got " + kind(given));
    const json section = canonicalKeys(given, "zero_optimization");
    Keys keys(*this, section, prefix);
    if (keys.take("stage")) {
      if (isAuto(section["stage"]))
        addAuto("zero", prefix + "stage");
      else {
        uint64_t stage = count(section["stage"], prefix + "stage");
        if (stage > 3)
          fail(prefix + "stage",
               "expects 0, 1, 2 or 3, got " + section["stage"].dump());
        add("zero", std::to_string(stage), prefix + "stage",
            section["stage"].dump(), ConfigSource::Explicit);
      }
    }
    // DeepSpeed requires a positive bucket; a 0 is reported with the
    // file's other problems instead of stopping at it.
    if (keys.take("reduce_bucket_size")) {
      const json &value = section["reduce_bucket_size"];
      if (value.is_number() && value.get<double>() == 0)
        notice(true, prefix + "reduce_bucket_size",
               "0 is refused by DeepSpeed too (it must be positive): give "
               "the elements per bucket, or \"auto\"");
      else
        setCount("reduce-bucket-elements", value,
                 prefix + "reduce_bucket_size", 1);
    }
    if (keys.take("stage3_param_persistence_threshold"))
      setCount("param-persistence-threshold",
               section["stage3_param_persistence_threshold"],
               prefix + "stage3_param_persistence_threshold");
    bool overlap = true;
    if (keys.take("overlap_comm")) {
      if (isAuto(section["overlap_comm"]))
        addAuto("overlap-comm", prefix + "overlap_comm");
      else {
        overlap = boolean(section["overlap_comm"], prefix + "overlap_comm");
        add("overlap-comm", overlap ? "true" : "false", prefix + "overlap_comm",
            section["overlap_comm"].dump(), ConfigSource::Explicit);
      }
    }
    // Counted in elements, as DeepSpeed does. Absent, ztc's defaults hold:
    // no prefetch (DeepSpeed prefetches 5e7 elements) and no bound.
    for (auto [key, flag] :
         {std::pair<const char *, const char *>{"stage3_prefetch_bucket_size",
                                                "prefetch-elements"},
          {"stage3_max_live_parameters", "max-live-elements"}}) {
      if (!keys.take(key))
        continue;
      if (!overlap) {
        notice(false, prefix + key,
               "ignored: prefetched gathers run on the communication stream, "
               "which overlap_comm false turns off");
        continue;
      }
      setCount(flag, section[key], prefix + key);
    }
    for (const char *key : {"stage3_gather_16bit_weights_on_model_save",
                            "stage3_gather_fp16_weights_on_model_save"})
      if (keys.take(key) && !isAuto(section[key]))
        out_.gather16BitWeightsOnSave |= boolean(section[key], prefix + key);
    // What ztc does anyway: true is accepted as it is.
    for (const char *key :
         {"contiguous_gradients", "reduce_scatter", "allgather_partitions",
          "ignore_unused_parameters", "load_from_fp32_weights"})
      if (keys.take(key) && !isAuto(section[key]) &&
          !boolean(section[key], prefix + key))
        notice(false, prefix + key,
               std::string("false is not built: ztc's buckets are "
                           "contiguous, reduced by reduce-scatter at stages "
                           "2-3 and gathered whole; ignored"));
    offload(section, keys);
    keys.reportRest("not a key of DeepSpeed's zero_optimization section, "
                    "which DeepSpeed 0.19 refuses too (a misspelling?)",
                    /*strict=*/true);
  }

  /// offload_optimizer and offload_param, and the legacy booleans
  /// cpu_offload (the optimizer) and cpu_offload_param: what they ask to
  /// move is recorded (addOffloadNotices words it for the target); NVMe is
  /// an error.
  void offload(const json &section, Keys &keys) {
    const std::string prefix = "zero_optimization.";
    for (const char *name : {"offload_optimizer", "offload_param"}) {
      if (!keys.take(name) || section[name].is_null())
        continue;
      const json &value = section[name];
      const std::string key = prefix + name;
      if (!value.is_object())
        fail(key, "expects an object {\"device\": \"cpu\", ...}, got " +
                      kind(value));
      Keys sub(*this, value, key + ".");
      std::string device = "none";
      if (sub.take("device") && !value["device"].is_null())
        device = text(value["device"], key + ".device");
      if (device != "none" && device != "cpu" && device != "nvme")
        fail(key + ".device", "expects \"none\", \"cpu\" or \"nvme\", got \"" +
                                  printable(device) + "\"");
      // Its placement knobs (buffers, pinning, paths) go with the one
      // notice about the section.
      for (const DeepSpeedKey &entry : deepSpeedKeys())
        if (entry.section == key)
          sub.take(entry.key);
      sub.reportRest("not a key of DeepSpeed's " + std::string(name) +
                         " section, which DeepSpeed 0.19 refuses too (a "
                         "misspelling?)",
                     /*strict=*/true);
      if (device == "nvme")
        notice(true, key,
               "device \"nvme\" is not built: ztc keeps the state in memory "
               "(use a higher stage, more ranks or --recompute to fit; `ztc "
               "inspect` gives the bytes per rank)");
      else if (device == "cpu")
        out_.offloads.push_back({key, device});
    }
    for (const char *legacy : {"cpu_offload", "cpu_offload_param"})
      if (keys.take(legacy) && !isAuto(section[legacy]) &&
          !section[legacy].is_null() &&
          boolean(section[legacy], prefix + legacy))
        out_.offloads.push_back({prefix + legacy, "cpu"});
  }

  void activationCheckpointing(const json &section) {
    const std::string prefix = "activation_checkpointing.";
    if (!section.is_object())
      fail("activation_checkpointing",
           "expects an object, got " + kind(section));
    // DeepSpeed checkpoints what the model code wraps; ztc keeps each
    // block's input and recomputes the rest, the layer-by-layer
    // checkpointing Hugging Face models do.
    add("recompute", "full", "activation_checkpointing", "{...}",
        ConfigSource::Default);
    Keys keys(*this, section, prefix);
    keys.reportRest("not a key of DeepSpeed's activation_checkpointing "
                    "section; ignored");
  }

public:
  /// After reading: the optimizer's lr goes to --lr unless the scheduler's
  /// warmup_max_lr, cycle_max_lr or lr_range_test_min_lr is the peak.
  void finish() {
    bool schedulerPeak = hasScheduler_ && !optimizerLrIsPeak_;
    if (optimizerLr_ && !schedulerPeak)
      add("lr", flagNumber(*optimizerLr_), "optimizer.params.lr",
          json(*optimizerLr_).dump(), ConfigSource::Explicit);
    else if (optimizerLrAuto_ && !schedulerPeak)
      addAuto("lr", "optimizer.params.lr");
    else if (optimizerLr_ && schedulerPeak) {
      const ConfigSetting *peak = out_.find("lr");
      if (peak && peak->source != ConfigSource::Auto &&
          peak->value != flagNumber(*optimizerLr_))
        notice(false, "optimizer.params.lr",
               json(*optimizerLr_).dump() + " has no effect: the scheduler's " +
                   peak->key + " " + peak->shown +
                   " sets the learning rate, as in DeepSpeed");
    }
  }

private:
  const std::string &path_;
  DeepSpeedConfig &out_;
  std::string optimizerName_;
  std::optional<double> optimizerLr_;
  bool optimizerLrAuto_ = false;
  bool hasScheduler_ = false;
  /// WarmupCosineLR scales the optimizer's lr instead of setting its own.
  bool optimizerLrIsPeak_ = false;
};

} // namespace

const ConfigSetting *DeepSpeedConfig::find(const std::string &flag) const {
  for (const ConfigSetting &setting : settings)
    if (setting.flag == flag)
      return &setting;
  return nullptr;
}

DeepSpeedConfig parseDeepSpeedConfig(const std::string &path,
                                     const std::string &text) {
  // DeepSpeed reads configs with hjson (trailing commas, comments, members
  // on lines of their own) and refuses a key given twice; parseHjson does
  // both, and errors name the line and column.
  json root = parseHjson(path, text);
  DeepSpeedConfig config;
  config.path = path;
  Reader reader(path, config);
  reader.read(root);
  reader.finish();
  return config;
}

DeepSpeedConfig readDeepSpeedConfig(const std::string &path) {
  return parseDeepSpeedConfig(path, readFile(path));
}

std::string readDeepSpeedConfigNoThrow(const std::string &path,
                                       DeepSpeedConfig &config) {
  try {
    config = readDeepSpeedConfig(path);
  } catch (const std::exception &error) {
    return error.what();
  }
  return "";
}

void addOffloadNotices(DeepSpeedConfig &config, bool deviceMemory) {
  for (const ConfigOffload &offload : config.offloads) {
    if (!deviceMemory) {
      config.notices.push_back(
          {false, offload.key,
           "device \"" + offload.device +
               "\" accepted: on the CPU backend parameters and optimizer "
               "state are in host memory already, so nothing moves and the "
               "step is the same",
           /*note=*/true});
      continue;
    }
    config.notices.push_back(
        {false, offload.key,
         "device \"" + offload.device +
             "\": ztc does not move state to the host on CUDA; it stays in "
             "device memory, the step is the same, and the planned bytes per "
             "rank (`ztc inspect`) are checked against the device's memory "
             "when the step loads (or now, with --device-memory BYTES)"});
  }
}

std::string checkNotices(const DeepSpeedConfig &config, bool strict,
                         std::vector<std::string> &warnings,
                         std::vector<std::string> *notes) {
  std::string errors;
  size_t count = 0;
  for (const ConfigNotice &notice : config.notices) {
    std::string line =
        config.path + ": " + printable(notice.key) + ": " + notice.message;
    if (notice.note) {
      if (notes)
        notes->push_back(line);
      continue;
    }
    if (!notice.error && !strict) {
      warnings.push_back(line);
      continue;
    }
    // The first error in full; the others counted after it.
    if (count++ == 0)
      errors = line;
  }
  if (count > 1)
    errors += " (and " + std::to_string(count - 1) + " more key" +
              (count > 2 ? "s" : "") + " ztc does not implement" +
              (strict ? "; --strict makes every one an error" : "") + ")";
  else if (count == 1 && strict)
    errors += " (--strict makes it an error)";
  return errors;
}

std::string resolveBatchSizes(const DeepSpeedConfig &config, uint64_t microFlag,
                              uint64_t accumFlag, uint64_t worldSize,
                              BatchSizes &sizes) {
  const std::string &path = config.path;
  // A term from the file, or "auto" and absent terms from the flag.
  auto term = [&](const BatchTerm &given, uint64_t flag, const char *key,
                  const char *flagName, std::string &error) -> uint64_t {
    if (given.given && !given.isAuto) {
      if (flag != 0 && flag != given.value)
        error = path + ": " + key + " is " + std::to_string(given.value) +
                ", but " + flagName + " is " + std::to_string(flag) +
                ": give one, or set it \"auto\"";
      return given.value;
    }
    return flag;
  };
  std::string error;
  uint64_t micro =
      term(config.microBatchSize, microFlag, "train_micro_batch_size_per_gpu",
           "--batch-size", error);
  uint64_t accum = term(config.gradAccumSteps, accumFlag,
                        "gradient_accumulation_steps", "--grad-accum", error);
  if (!error.empty())
    return error;
  const BatchTerm &train = config.trainBatchSize;
  uint64_t world = std::max<uint64_t>(1, worldSize);
  auto identity = [&](uint64_t global) {
    return path + ": train_batch_size " + std::to_string(global) +
           " is not train_micro_batch_size_per_gpu " + std::to_string(micro) +
           " x gradient_accumulation_steps " + std::to_string(accum) +
           " x world size " + std::to_string(world) +
           " (= " + std::to_string(micro * accum * world) + ")";
  };
  if (train.given && !train.isAuto) {
    uint64_t global = train.value;
    // DeepSpeed derives the term left out.
    if (micro == 0 && accum == 0) {
      accum = 1;
      micro = global / world;
      if (micro == 0 || micro * world != global)
        return path + ": train_batch_size " + std::to_string(global) +
               " does not divide over world size " + std::to_string(world);
    } else if (micro == 0) {
      micro = global / (accum * world);
      if (micro == 0 || micro * accum * world != global)
        return path + ": train_batch_size " + std::to_string(global) +
               " does not divide into gradient_accumulation_steps " +
               std::to_string(accum) + " x world size " + std::to_string(world);
    } else if (accum == 0) {
      accum = global / (micro * world);
      if (accum == 0 || micro * accum * world != global)
        return path + ": train_batch_size " + std::to_string(global) +
               " does not divide into train_micro_batch_size_per_gpu " +
               std::to_string(micro) + " x world size " + std::to_string(world);
    } else if (micro * accum * world != global) {
      return identity(global);
    }
  } else {
    if (micro == 0)
      return path + ": no micro-batch size: give "
                    "train_micro_batch_size_per_gpu or train_batch_size, or "
                    "--batch-size";
    if (accum == 0)
      accum = 1;
  }
  sizes = {micro, accum, micro * accum * world};
  return "";
}

bool sameFlagValue(const std::string &a, const std::string &b) {
  auto split = [](const std::string &text) {
    std::vector<std::string> parts;
    size_t from = 0;
    while (true) {
      size_t comma = text.find(',', from);
      std::string part = text.substr(from, comma - from);
      size_t first = part.find_first_not_of(" \t");
      size_t last = part.find_last_not_of(" \t");
      parts.push_back(first == std::string::npos
                          ? std::string()
                          : part.substr(first, last - first + 1));
      if (comma == std::string::npos)
        return parts;
      from = comma + 1;
    }
  };
  std::vector<std::string> left = split(a), right = split(b);
  if (left.size() != right.size())
    return false;
  for (size_t i = 0; i < left.size(); ++i) {
    const std::string &x = left[i], &y = right[i];
    if (x == y)
      continue;
    char *xEnd = nullptr, *yEnd = nullptr;
    double dx = std::strtod(x.c_str(), &xEnd);
    double dy = std::strtod(y.c_str(), &yEnd);
    bool numbers = !x.empty() && !y.empty() && !*xEnd && !*yEnd;
    if (numbers ? dx != dy : x != y)
      return false;
  }
  return true;
}

std::string checkCompiledAgainst(
    const DeepSpeedConfig &config,
    const std::vector<std::pair<std::string, std::string>> &compiled,
    uint64_t worldSize, const std::string &artifact) {
  auto value = [&](const std::string &flag) -> std::string {
    for (const auto &[name, given] : compiled)
      if (name == flag)
        return given;
    return "";
  };
  auto differs = [&](const std::string &key, const std::string &shown,
                     const std::string &flag) {
    return config.path + ": " + key + " is " + shown + ", but " + artifact +
           " was compiled with --" + flag + " " + value(flag) +
           ": compile it with this config (ztc compile --config " +
           config.path + ")";
  };
  struct Term {
    const BatchTerm &term;
    const char *key, *flag;
  } terms[] = {
      {config.microBatchSize, "train_micro_batch_size_per_gpu", "batch-size"},
      {config.gradAccumSteps, "gradient_accumulation_steps", "grad-accum"}};
  for (const Term &t : terms)
    if (t.term.given && !t.term.isAuto &&
        std::to_string(t.term.value) != value(t.flag))
      return differs(t.key, std::to_string(t.term.value), t.flag);
  for (const ConfigSetting &setting : config.settings) {
    if (setting.source != ConfigSource::Explicit)
      continue;
    std::string given = value(setting.flag);
    if (!given.empty() && !sameFlagValue(given, setting.value))
      return differs(setting.key, setting.shown, setting.flag);
  }
  BatchSizes sizes;
  uint64_t micro = std::strtoull(value("batch-size").c_str(), nullptr, 10);
  uint64_t accum = std::strtoull(value("grad-accum").c_str(), nullptr, 10);
  return resolveBatchSizes(config, micro, accum, worldSize, sizes);
}

} // namespace ztc::rt
