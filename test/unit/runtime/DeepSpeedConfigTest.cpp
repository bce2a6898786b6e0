//===- DeepSpeedConfigTest.cpp - reading DeepSpeed configs ----------------===//
//
// What a config sets, what it derives, and what it refuses, on configs as
// Hugging Face's DeepSpeed guide writes them and on edge cases.
//
//===----------------------------------------------------------------------===//

#include "runtime/train/DeepSpeedConfig.h"

#include "TestUtil.h"
#include "runtime/Error.h"

using namespace ztc::rt;

namespace {

DeepSpeedConfig parse(const std::string &text) {
  return parseDeepSpeedConfig("ds.json", text);
}

/// "flag=value" for every setting, "flag=auto" or "flag=value (default)".
std::vector<std::string> settings(const DeepSpeedConfig &config) {
  std::vector<std::string> lines;
  for (const ConfigSetting &s : config.settings)
    lines.push_back(s.flag + "=" +
                    (s.source == ConfigSource::Auto ? "auto" : s.value) +
                    (s.source == ConfigSource::Default ? " (default)" : "") +
                    (s.appliesWith.empty() ? "" : " [" + s.appliesWith + "]"));
  return lines;
}

std::vector<std::string> notices(const DeepSpeedConfig &config) {
  std::vector<std::string> lines;
  for (const ConfigNotice &n : config.notices)
    lines.push_back((n.note ? "note " : n.error ? "error " : "warning ") +
                    n.key);
  return lines;
}

} // namespace

TEST(DeepSpeedConfigTest, HuggingFaceAutoConfig) {
  DeepSpeedConfig config = parse(R"({
    "fp16": {"enabled": "auto", "loss_scale": 0, "initial_scale_power": 16},
    "optimizer": {"type": "AdamW", "params": {"lr": "auto", "betas": "auto",
                  "eps": "auto", "weight_decay": "auto"}},
    "scheduler": {"type": "WarmupLR", "params": {"warmup_min_lr": "auto",
                  "warmup_max_lr": "auto", "warmup_num_steps": "auto"}},
    "zero_optimization": {"stage": 2, "overlap_comm": true,
                          "reduce_bucket_size": 2e8},
    "gradient_accumulation_steps": "auto", "gradient_clipping": "auto",
    "train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto"})");
  std::vector<std::string> expected = {"clip-grad-norm=auto",
                                       "optimizer=adamw",
                                       "weight-decay=auto",
                                       "betas=auto",
                                       "eps=auto",
                                       "min-lr=auto",
                                       "lr=auto",
                                       "warmup-steps=auto",
                                       "warmup-type=log (default)",
                                       "lr-schedule=warmup",
                                       "precision=auto",
                                       "loss-scale=0 [fp16]",
                                       "initial-scale-power=16 [fp16]",
                                       "zero=2",
                                       "reduce-bucket-elements=200000000",
                                       "overlap-comm=true"};
  EXPECT_EQ(settings(config), expected);
  EXPECT_EQ(notices(config), std::vector<std::string>{});
  EXPECT_TRUE(config.trainBatchSize.isAuto);
  EXPECT_TRUE(config.microBatchSize.isAuto);
  EXPECT_TRUE(config.gradAccumSteps.isAuto);
}

TEST(DeepSpeedConfigTest, StageThreePrefetch) {
  // DeepSpeed counts the prefetch budget and the live bound in elements.
  DeepSpeedConfig config = parse(
      R"({"zero_optimization": {"stage": 3, "overlap_comm": true,
          "stage3_prefetch_bucket_size": 5e7,
          "stage3_max_live_parameters": 1e9}})");
  EXPECT_EQ(config.find("overlap-comm")->value, "true");
  EXPECT_EQ(config.find("prefetch-elements")->value, "50000000");
  EXPECT_EQ(config.find("prefetch-elements")->key,
            "zero_optimization.stage3_prefetch_bucket_size");
  EXPECT_EQ(config.find("max-live-elements")->value, "1000000000");
  EXPECT_EQ(notices(config), std::vector<std::string>{});
  // Without overlap there is no stream to prefetch on: said, not mapped.
  DeepSpeedConfig off = parse(
      R"({"zero_optimization": {"stage": 3, "overlap_comm": false,
          "stage3_prefetch_bucket_size": 5e7}})");
  EXPECT_EQ(off.find("overlap-comm")->value, "false");
  EXPECT_EQ(off.find("prefetch-elements"), nullptr);
  EXPECT_EQ(notices(off),
            std::vector<std::string>{
                "warning zero_optimization.stage3_prefetch_bucket_size"});
}

TEST(DeepSpeedConfigTest, AdamModesAndPeaks) {
  // DeepSpeed's Adam is AdamW unless adam_w_mode is false; an optimizer
  // without weight_decay takes DeepSpeed's 0.
  EXPECT_EQ(
      parse(R"({"optimizer": {"type": "Adam"}})").find("optimizer")->value,
      "adamw");
  DeepSpeedConfig l2 = parse(
      R"({"optimizer": {"type": "adam", "params": {"adam_w_mode": false}}})");
  EXPECT_EQ(l2.find("optimizer")->value, "adam");
  EXPECT_EQ(l2.find("weight-decay")->value, "0");
  EXPECT_EQ(l2.find("weight-decay")->source, ConfigSource::Default);
  // WarmupLR's warmup_max_lr is the peak; the optimizer's lr then has no
  // effect, and says so.
  DeepSpeedConfig peak = parse(
      R"({"optimizer": {"type": "AdamW", "params": {"lr": 0.01}},
          "scheduler": {"type": "WarmupLR", "params": {"warmup_max_lr": 3e-4}}})");
  EXPECT_EQ(peak.find("lr")->value, "0.0003");
  EXPECT_EQ(peak.find("lr")->key, "scheduler.params.warmup_max_lr");
  EXPECT_EQ(notices(peak),
            std::vector<std::string>{"warning optimizer.params.lr"});
  // WarmupCosineLR scales the optimizer's lr.
  DeepSpeedConfig cosine = parse(
      R"({"optimizer": {"type": "AdamW", "params": {"lr": 0.01}},
          "scheduler": {"type": "WarmupCosineLR",
                        "params": {"total_num_steps": 100}}})");
  EXPECT_EQ(cosine.find("lr")->value, "0.01");
  EXPECT_EQ(cosine.find("cos-min-ratio")->value, "0.0001");
  // OneCycle cycles Adam's beta1 unless told not to.
  DeepSpeedConfig cycle = parse(
      R"({"optimizer": {"type": "AdamW"},
          "scheduler": {"type": "OneCycle",
                        "params": {"cycle_min_lr": 0.1, "cycle_max_lr": 1}}})");
  EXPECT_EQ(notices(cycle),
            std::vector<std::string>{"error scheduler.params.cycle_momentum"});
  EXPECT_NE(ZTC_ERROR_MESSAGE(parse(R"({"scheduler": {"type": "OneCycle"}})"))
                .find("scheduler.params.cycle_min_lr: is required by OneCycle"),
            std::string::npos);
}

TEST(DeepSpeedConfigTest, NoticesAndStrict) {
  // sub_group_size at DeepSpeed's default says nothing; another value is a
  // tuning knob ztc does not have.
  DeepSpeedConfig config = parse(
      R"({"zero_optimization": {"stage": 3, "sub_group_size": 1e8,
            "offload_param": {"device": "none"},
            "offload_optimizer": {"device": "cpu", "pin_memory": true},
            "zero_quantized_weights": true},
          "wandb": {"enabled": false}, "tensorboard": {"enabled": true},
          "zero_optimisation": {}})");
  EXPECT_EQ(notices(config),
            (std::vector<std::string>{
                "warning zero_optimization.sub_group_size",
                "error zero_optimization.zero_quantized_weights",
                "warning tensorboard", "warning zero_optimisation"}));
  std::vector<std::string> warnings, notes;
  std::string error = checkNotices(config, /*strict=*/false, warnings);
  EXPECT_EQ(warnings.size(), 3u);
  EXPECT_EQ(error, "ds.json: zero_optimization.zero_quantized_weights: is not "
                   "built (ZeRO++ quantized communication; use "
                   "communication_data_type (fp16, bf16) to halve the bytes)");
  warnings.clear();
  error = checkNotices(config, /*strict=*/true, warnings);
  EXPECT_TRUE(warnings.empty());
  EXPECT_NE(error.find("(and 3 more keys ztc does not implement; --strict "
                       "makes every one an error)"),
            std::string::npos);
  // Offloading to the host: a note on the CPU backend (never an error, not
  // under --strict either), a warning on CUDA.
  ASSERT_EQ(config.offloads.size(), 1u);
  EXPECT_EQ(config.offloads[0].key, "zero_optimization.offload_optimizer");
  DeepSpeedConfig cpu = config;
  addOffloadNotices(cpu, /*deviceMemory=*/false);
  warnings.clear();
  checkNotices(cpu, /*strict=*/true, warnings, &notes);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_EQ(notes[0], "ds.json: zero_optimization.offload_optimizer: device "
                      "\"cpu\" accepted: on the CPU backend parameters and "
                      "optimizer state are in host memory already, so nothing "
                      "moves and the step is the same");
  DeepSpeedConfig cuda = config;
  addOffloadNotices(cuda, /*deviceMemory=*/true);
  warnings.clear();
  notes.clear();
  checkNotices(cuda, /*strict=*/false, warnings, &notes);
  EXPECT_TRUE(notes.empty());
  EXPECT_EQ(warnings.size(), 4u);
  // The legacy booleans, and NVMe.
  DeepSpeedConfig legacy = parse(R"({"zero_optimization": {"stage": 2,
      "cpu_offload": true, "cpu_offload_param": false,
      "cpu_offload_use_pin_memory": true}})");
  ASSERT_EQ(legacy.offloads.size(), 1u);
  EXPECT_EQ(legacy.offloads[0].key, "zero_optimization.cpu_offload");
  EXPECT_EQ(notices(legacy),
            std::vector<std::string>{
                "note zero_optimization.cpu_offload_use_pin_memory"});
  EXPECT_EQ(notices(parse(R"({"zero_optimization": {"offload_param":
                               {"device": "nvme", "nvme_path": "/x"}}})")),
            std::vector<std::string>{"error zero_optimization.offload_param"});
  // The legacy boolean is stage 1.
  EXPECT_EQ(parse(R"({"zero_optimization": true})").find("zero")->value, "1");
}

TEST(DeepSpeedConfigTest, Malformed) {
  auto message = [](const std::string &text) {
    return ZTC_ERROR_MESSAGE(parse(text));
  };
  EXPECT_EQ(message(R"({"a": {"b": 1, "b": 2}})"),
            "ds.json:1:16: the key \"b\" appears twice in one object "
            "(DeepSpeed refuses that too)");
  // The same key in two objects is fine.
  EXPECT_EQ(
      message(R"({"fp16": {"enabled": false}, "bf16": {"enabled": false}})"),
      "");
  EXPECT_EQ(
      message(R"({"train_batch_size": 8.5})"),
      "ds.json: train_batch_size: expects a whole number, got number 8.5");
  EXPECT_EQ(message(R"({"train_batch_size": 0})"),
            "ds.json: train_batch_size: expects a whole number of at least 1, "
            "got 0");
  EXPECT_EQ(message(R"({"optimizer": {"type": "SGD", "params": []}})"),
            "ds.json: optimizer.params: expects an object, got array []");
  EXPECT_EQ(message("[1]"),
            "ds.json: expects a JSON object at the top, got array [1]");
  EXPECT_EQ(message(R"({"communication_data_type": "int8"})"),
            "ds.json: communication_data_type: expects \"fp16\", \"bfp16\", "
            "\"bf16\" or \"fp32\", got \"int8\"");
}

TEST(DeepSpeedConfigTest, BatchIdentity) {
  auto resolve = [](const std::string &text, uint64_t micro, uint64_t accum,
                    uint64_t world, BatchSizes &sizes) {
    return resolveBatchSizes(parse(text), micro, accum, world, sizes);
  };
  BatchSizes sizes;
  // DeepSpeed derives the accumulation, the micro-batch, or both.
  EXPECT_EQ(resolve(R"({"train_batch_size": 64,
                        "train_micro_batch_size_per_gpu": 8})",
                    0, 0, 2, sizes),
            "");
  EXPECT_EQ(sizes.accum, 4u);
  EXPECT_EQ(resolve(R"({"train_batch_size": 64,
                        "gradient_accumulation_steps": 2})",
                    0, 0, 4, sizes),
            "");
  EXPECT_EQ(sizes.micro, 8u);
  EXPECT_EQ(resolve(R"({"train_batch_size": 64})", 0, 0, 4, sizes), "");
  EXPECT_EQ(sizes.micro, 16u);
  EXPECT_EQ(sizes.accum, 1u);
  // "auto" takes the flags.
  EXPECT_EQ(resolve(R"({"train_batch_size": "auto",
                        "train_micro_batch_size_per_gpu": "auto"})",
                    4, 3, 2, sizes),
            "");
  EXPECT_EQ(sizes.global, 24u);
  EXPECT_EQ(resolve(R"({"train_batch_size": 64,
                        "train_micro_batch_size_per_gpu": 8,
                        "gradient_accumulation_steps": 2})",
                    0, 0, 2, sizes),
            "ds.json: train_batch_size 64 is not "
            "train_micro_batch_size_per_gpu 8 x gradient_accumulation_steps "
            "2 x world size 2 (= 32)");
  EXPECT_EQ(resolve(R"({"train_micro_batch_size_per_gpu": 8})", 4, 0, 1, sizes),
            "ds.json: train_micro_batch_size_per_gpu is 8, but --batch-size "
            "is 4: give one, or set it \"auto\"");
  EXPECT_EQ(resolve(R"({"train_batch_size": 10})", 0, 0, 4, sizes),
            "ds.json: train_batch_size 10 does not divide over world size 4");
  EXPECT_EQ(resolve("{}", 0, 0, 1, sizes),
            "ds.json: no micro-batch size: give "
            "train_micro_batch_size_per_gpu or train_batch_size, or "
            "--batch-size");
}

TEST(DeepSpeedConfigTest, CompiledAgainst) {
  DeepSpeedConfig config = parse(
      R"({"train_batch_size": 32, "train_micro_batch_size_per_gpu": 8,
          "bf16": {"enabled": true}, "zero_optimization": {"stage": 2}})");
  std::vector<std::pair<std::string, std::string>> compiled = {
      {"batch-size", "8"},
      {"grad-accum", "2"},
      {"precision", "bf16"},
      {"zero", "2"},
      {"optimizer", "adamw"}};
  EXPECT_EQ(checkCompiledAgainst(config, compiled, 2, "a.ztc"), "");
  // On 4 ranks the same artifact makes a global batch of 64.
  EXPECT_EQ(checkCompiledAgainst(config, compiled, 4, "a.ztc"),
            "ds.json: train_batch_size 32 is not "
            "train_micro_batch_size_per_gpu 8 x gradient_accumulation_steps "
            "2 x world size 4 (= 64)");
  compiled[3].second = "3";
  EXPECT_EQ(checkCompiledAgainst(config, compiled, 2, "a.ztc"),
            "ds.json: zero_optimization.stage is 2, but a.ztc was compiled "
            "with --zero 3: compile it with this config (ztc compile "
            "--config ds.json)");

  // What the step compiles in, as the manifest records it to the last bit:
  // numbers compare as numbers, lists element by element.
  DeepSpeedConfig adam = parse(
      R"({"optimizer": {"type": "AdamW", "params": {"lr": 3e-4,
          "weight_decay": 0.1, "betas": [0.9, 0.95]}}})");
  std::vector<std::pair<std::string, std::string>> adamCompiled = {
      {"batch-size", "4"},
      {"optimizer", "adamw"},
      {"lr", "0.00029999999999999997"},
      {"weight-decay", "0.10000000000000001"},
      {"betas", "0.90000000000000002,0.94999999999999996"}};
  EXPECT_EQ(checkCompiledAgainst(adam, adamCompiled, 1, "a.ztc"), "");
  adamCompiled[2].second = "0.5";
  EXPECT_EQ(checkCompiledAgainst(adam, adamCompiled, 1, "a.ztc"),
            "ds.json: optimizer.params.lr is 0.0003, but a.ztc was compiled "
            "with --lr 0.5: compile it with this config (ztc compile "
            "--config ds.json)");
  adamCompiled[2].second = "0.0003";
  adamCompiled[4].second = "0.9,0.999";
  EXPECT_NE(checkCompiledAgainst(adam, adamCompiled, 1, "a.ztc")
                .find("optimizer.params.betas is [0.9,0.95], but a.ztc was "
                      "compiled with --betas 0.9,0.999"),
            std::string::npos);
}

TEST(DeepSpeedConfigTest, NumberOutOfRange) {
  // Found by ztc-fuzz-ds-config: a number past double's range is an error
  // naming the file and where, not an uncaught exception.
  EXPECT_EQ(ZTC_ERROR_MESSAGE(parse(R"({"a": 8888e8888888})")),
            "ds.json:1:7: the number 8888e8888888 is out of range");
  EXPECT_NE(ZTC_ERROR_MESSAGE(parse("  8888e8888888")), "");
}

TEST(DeepSpeedConfigTest, LenientJsonAsDeepSpeedReadsIt) {
  // hjson, as DeepSpeed reads configs: comments, trailing commas, members
  // on lines of their own, quoteless keys and strings.
  DeepSpeedConfig config = parse(R"(
    # a comment
    train_micro_batch_size_per_gpu: 4   // another
    "optimizer": {
      type: AdamW
      "params": {"lr": 3e-4, "weight_decay": 0.01,},
    },
    /* the last */
  )");
  EXPECT_EQ(config.microBatchSize.value, 4u);
  EXPECT_EQ(config.find("optimizer")->value, "adamw");
  EXPECT_EQ(config.find("lr")->value, "0.0003");
  // What even hjson refuses names the line and column.
  EXPECT_EQ(ZTC_ERROR_MESSAGE(parse("{\n  \"a\": [1, 2\n")).rfind("ds.json:3:", 0),
            0u);
}
