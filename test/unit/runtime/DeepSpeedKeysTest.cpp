//===- DeepSpeedKeysTest.cpp - every DeepSpeed key is known ---------------===//
//
// test/fixtures/deepspeed/keys.json lists the keys DeepSpeed 0.19.8 defines,
// recorded from the real package (its pydantic models and the keys its
// config reader looks up). Every key of the top level and of the sections
// ztc reads key by key must be in runtime/train/DeepSpeedKeys.cpp, with
// DeepSpeed's other names; the sections ztc takes whole (tensorboard,
// pipeline, ...) are covered by their top-level entry. And a config that
// sets each known key to a value other than its default is never told the
// key is unknown.
//
//===----------------------------------------------------------------------===//

#include "runtime/train/DeepSpeedKeys.h"

#include "TestUtil.h"
#include "runtime/Error.h"
#include "runtime/io/File.h"
#include "runtime/train/DeepSpeedConfig.h"

#include <nlohmann/json.hpp>

#include <algorithm>

using namespace ztc::rt;

namespace {

nlohmann::json recorded() {
  return nlohmann::json::parse(
      readFile(ZTC_TEST_FIXTURES_DIR "/deepspeed/keys.json"));
}

/// The sections ztc reads key by key.
const char *const kReadSections[] = {"",
                                     "zero_optimization",
                                     "zero_optimization.offload_optimizer",
                                     "zero_optimization.offload_param",
                                     "fp16",
                                     "bf16",
                                     "bfloat16",
                                     "activation_checkpointing",
                                     "data_types",
                                     "optimizer",
                                     "scheduler"};

} // namespace

TEST(DeepSpeedKeysTest, EveryKeyDeepSpeedDefinesIsKnown) {
  nlohmann::json keys = recorded();
  ASSERT_EQ(keys.at("deepspeed"), "0.19.8");
  size_t checked = 0;
  for (const char *section : kReadSections) {
    for (const nlohmann::json &key : keys.at("sections").at(section)) {
      EXPECT_NE(findDeepSpeedKey(section, key.get<std::string>()), nullptr)
          << "'" << section << "." << key.get<std::string>()
          << "' is a DeepSpeed key DeepSpeedKeys.cpp does not list";
      ++checked;
    }
  }
  EXPECT_GT(checked, 120u);
  // Every alias and deprecated name DeepSpeed has for a key of these
  // sections names the same entry as the key.
  for (auto &[alias, field] : keys.at("aliases").items()) {
    size_t dot = alias.rfind('.');
    std::string section = dot == std::string::npos ? "" : alias.substr(0, dot);
    if (std::find(std::begin(kReadSections), std::end(kReadSections),
                  section) == std::end(kReadSections))
      continue;
    std::string name = alias.substr(dot == std::string::npos ? 0 : dot + 1);
    std::string target = field.get<std::string>();
    std::string targetName = target.substr(target.rfind('.') + 1);
    EXPECT_EQ(findDeepSpeedKey(section, name),
              findDeepSpeedKey(section, targetName))
        << alias << " and " << target << " are one key in DeepSpeed";
  }
  // The keys DeepSpeed 0.19 removed (it refuses them) are refused here too
  // when they are on.
  for (auto &[removed, why] : keys.at("removed").items()) {
    size_t dot = removed.rfind('.');
    std::string section = dot == std::string::npos ? "" : removed.substr(0, dot);
    const DeepSpeedKey *entry = findDeepSpeedKey(
        section, removed.substr(dot == std::string::npos ? 0 : dot + 1));
    ASSERT_NE(entry, nullptr) << removed;
    EXPECT_TRUE(entry->use == KeyUse::Refuse || entry->use == KeyUse::Read)
        << removed << ": DeepSpeed 0.19 removed it";
  }
}

TEST(DeepSpeedKeysTest, NoKnownKeyIsCalledUnknown) {
  // Each table key of the top level and of zero_optimization, set to a
  // value DeepSpeed does not default to, gets its entry's word, never
  // "not a key of DeepSpeed's ... section".
  for (const DeepSpeedKey &entry : deepSpeedKeys()) {
    std::string section = entry.section;
    if (entry.use == KeyUse::Read ||
        (section != "" && section != "zero_optimization"))
      continue;
    nlohmann::json value = nlohmann::json::object({{"enabled", true}});
    if (std::string(entry.quietWhen) == "true")
      value = false;
    else if (std::string(entry.quietWhen) == "false")
      value = true;
    else if (std::string(entry.quietWhen).find_first_of("0123456789") == 0 ||
             std::string(entry.quietWhen) == "-1")
      value = 12345;
    nlohmann::json config = section.empty()
                                ? nlohmann::json{{entry.key, value}}
                                : nlohmann::json{{section, {{entry.key, value}}}};
    DeepSpeedConfig parsed = parseDeepSpeedConfig("ds.json", config.dump());
    std::string name = section.empty() ? entry.key : section + "." + entry.key;
    ASSERT_EQ(parsed.notices.size(), 1u) << name << " in " << config.dump();
    const ConfigNotice &notice = parsed.notices[0];
    EXPECT_EQ(notice.key, name);
    EXPECT_EQ(notice.message.find("not a key"), std::string::npos)
        << name << ": " << notice.message;
    EXPECT_EQ(notice.error, entry.use == KeyUse::Refuse) << name;
    EXPECT_EQ(notice.note, entry.use == KeyUse::Note) << name;
  }
}

TEST(DeepSpeedKeysTest, DefaultsSayNothing) {
  // A key at DeepSpeed's default, "auto" or null needs no word.
  for (const char *text :
       {R"({"zero_optimization": {"sub_group_size": 1e9,
            "memory_efficient_linear": true, "zero_hpz_partition_size": 1,
            "stage3_max_reuse_distance": "auto", "zenflow": null}})",
        R"({"gradient_predivide_factor": 1.0, "prescale_gradients": false,
            "tensorboard": {"enabled": false}, "pipeline": false,
            "torch_autocast": {"enabled": false}})",
        R"({"bf16": {"enabled": true, "bf16_master_weights_and_grads": false,
            "check_grad_overflow": true}})"})
    EXPECT_TRUE(parseDeepSpeedConfig("ds.json", text).notices.empty()) << text;
}

TEST(DeepSpeedKeysTest, AliasesReadAsTheirKey) {
  // DeepSpeed's unprefixed names are its stage3_ keys.
  DeepSpeedConfig config = parseDeepSpeedConfig(
      "ds.json", R"({"zero_optimization": {"stage": 3,
          "gather_16bit_weights_on_model_save": true,
          "prefetch_bucket_size": 1000, "max_live_parameters": 2000,
          "param_persistence_threshold": 10}})");
  EXPECT_TRUE(config.notices.empty());
  EXPECT_TRUE(config.gather16BitWeightsOnSave);
  EXPECT_EQ(config.find("prefetch-elements")->value, "1000");
  EXPECT_EQ(config.find("max-live-elements")->value, "2000");
  EXPECT_EQ(config.find("param-persistence-threshold")->value, "10");
  // Both names at once is one key given twice.
  EXPECT_EQ(ZTC_ERROR_MESSAGE(parseDeepSpeedConfig(
                "ds.json", R"({"zero_optimization": {
                    "stage3_prefetch_bucket_size": 1,
                    "prefetch_bucket_size": 2}})")),
            "ds.json: zero_optimization.prefetch_bucket_size: and "
            "\"stage3_prefetch_bucket_size\" are one key under DeepSpeed's "
            "two names: give one");
}
