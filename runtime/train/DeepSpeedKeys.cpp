//===- DeepSpeedKeys.cpp - every key of DeepSpeed's config ----------------===//
//
// One row per key of DeepSpeed 0.19.8's config (deepspeed/runtime/
// constants.py, config.py, zero/config.py, zero/offload_config.py,
// precision_config.py, activation_checkpointing/config.py, and the monitor,
// profiler and compile sections), in the order of docs/config.md. Defaults
// are DeepSpeed's.
//
//===----------------------------------------------------------------------===//

#include "runtime/train/DeepSpeedKeys.h"

namespace ztc::rt {

namespace {

constexpr KeyUse Read = KeyUse::Read, Note = KeyUse::Note,
                 Warn = KeyUse::Warn, Refuse = KeyUse::Refuse;

// Reasons shared by several keys.
constexpr const char *kDataParallel = "ztc is data parallel (ZeRO)";
constexpr const char *kMetrics = "ztc-train --metrics FILE, ztc plot";
constexpr const char *kRemoved = "removed from DeepSpeed itself in 0.19";
constexpr const char *kPlacement =
    "it places or schedules work; ztc plans its own, and what is computed "
    "is the same";

const std::vector<DeepSpeedKey> &table() {
  static const std::vector<DeepSpeedKey> keys = {
      // --- The top level ------------------------------------------------
      {"", "train_batch_size", Read, "", "the batch identity"},
      {"", "train_micro_batch_size_per_gpu", Read, "", "--batch-size"},
      {"", "gradient_accumulation_steps", Read, "", "--grad-accum"},
      {"", "gradient_clipping", Read, "", "--clip-grad-norm"},
      {"", "steps_per_print", Read, "", "ztc-train --log-every"},
      {"", "optimizer", Read, "", "--optimizer and its flags"},
      {"", "scheduler", Read, "", "--lr-schedule and its flags"},
      {"", "fp16", Read, "", "--precision fp16 and loss scaling"},
      {"", "bf16", Read, "", "--precision bf16", "bfloat16"},
      {"", "communication_data_type", Read, "", "--comm-dtype"},
      {"", "data_types", Read, "", "--grad-accum-dtype"},
      {"", "zero_optimization", Read, "", "--zero and its flags"},
      {"", "activation_checkpointing", Read, "", "--recompute full"},
      {"", "amp", Read, "off", "refused when on: use fp16 or bf16"},
      {"", "torch_autocast", Refuse, "off",
       "DeepSpeed's torch.autocast over the listed module types; use "
       "\"bf16\" or \"fp16\" (--precision), ztc's own autocast"},
      {"", "managed_gradient_accumulation", Refuse, "true",
       "ztc compiles the accumulation boundary into the step"},
      {"", "gradient_allreduce_op", Refuse, "\"mean\"",
       "ztc averages the gradients over the ranks"},
      {"", "prescale_gradients", Warn, "false",
       "ztc divides by the world size after the reduction"},
      {"", "gradient_predivide_factor", Warn, "1",
       "ztc divides by the world size after the reduction"},
      {"", "seq_parallel_communication_data_type", Note, "\"fp32\"",
       "ztc has no sequence parallelism"},
      {"", "disable_allgather", Note, "false", kPlacement},
      {"", "disable_python_gc", Note, "", "ztc-train runs no Python"},
      {"", "log_level", Note, "", "ztc-train prints what it does"},
      {"", "dataloader_drop_last", Warn, "false",
       "ztc-train reads whole micro-batches"},
      {"", "zero_allow_untested_optimizer", Warn, "false",
       "every ztc optimizer is tested with ZeRO"},
      {"", "zero_force_ds_cpu_optimizer", Note, "true",
       "ztc does not offload the optimizer"},
      {"", "wall_clock_breakdown", Warn, "false",
       "ztc-train --metrics has the timings"},
      {"", "memory_breakdown", Warn, "false",
       "`ztc inspect` gives the memory per rank before anything runs"},
      {"", "flops_profiler", Warn, "off",
       "--recompute reports the step's FLOPs"},
      {"", "tensorboard", Warn, "off", kMetrics},
      {"", "wandb", Warn, "off", kMetrics},
      {"", "csv_monitor", Warn, "off", kMetrics},
      {"", "comet", Warn, "off", kMetrics},
      {"", "trackio", Warn, "off", kMetrics},
      {"", "aim", Warn, "off", kMetrics},
      {"", "comms_logger", Warn, "off", "`ztc inspect` lists the collectives"},
      {"", "timers", Note, "", "ztc-train --metrics has the timings"},
      {"", "autotuning", Warn, "off", "not built"},
      {"", "checkpoint", Warn, "off",
       "ztc-train --save writes sharded checkpoints of its own"},
      {"", "datastates_ckpt", Warn, "off",
       "ztc-train --save writes sharded checkpoints of its own"},
      {"", "aio", Note, "", "ztc does not offload to NVMe"},
      {"", "dump_state", Warn, "false", "not built"},
      {"", "seed", Warn, "", "ztc-train --seed"},
      {"", "compile", Note, "off", "ztc compiles the whole step anyway"},
      {"", "use_data_before_expert_parallelism", Note, "false",
       "ztc has no expert parallelism"},
      {"", "gradient_accumulation_dtype", Warn, "",
       "use data_types.grad_accum_dtype"},
      {"", "sparse_gradients", Refuse, "false", kRemoved},
      {"", "elasticity", Refuse, "off", kRemoved},
      {"", "compression_training", Refuse, "off",
       kRemoved},
      {"", "curriculum_learning", Refuse, "off",
       kRemoved},
      {"", "data_efficiency", Refuse, "off",
       "ztc reads the data as it is given"},
      {"", "pipeline", Refuse, "off", kDataParallel},
      {"", "tensor_parallel", Refuse, "off", kDataParallel},
      {"", "expert_parallel", Refuse, "off", kDataParallel},
      {"", "sequence_parallel_size", Refuse, "1", kDataParallel},
      {"", "hybrid_engine", Refuse, "off", "not built"},
      {"", "quantize_training", Refuse, "off", kRemoved},
      {"", "weight_quantization", Refuse, "off", "ztc does not quantize"},
      {"", "progressive_layer_drop", Refuse, "off", kRemoved},
      {"", "sparse_attention", Refuse, "off",
       kRemoved},
      {"", "graph_harvesting", Refuse, "false", kRemoved},
      {"", "nebula", Refuse, "off", kRemoved},
      {"", "allgather_size", Note, "",
       "the legacy \"zero_optimization\": true form's gather size; " "ztc gathers per reduction bucket"},
      {"", "vocabulary_size", Note, "",
       "DeepSpeed only warns when it is not a multiple of 8; ztc compiles "
       "the model's vocabulary as exported"},
      {"", "eigenvalue", Refuse, "off", kRemoved},

      // --- optimizer and scheduler ------------------------------------
      {"optimizer", "type", Read, "", "--optimizer"},
      {"optimizer", "params", Read, "", "the optimizer's flags"},
      {"optimizer", "legacy_fusion", Note, "false", kPlacement},
      {"scheduler", "type", Read, "", "--lr-schedule"},
      {"scheduler", "params", Read, "", "the schedule's flags"},

      // --- fp16 and bf16 ------------------------------------------------
      {"fp16", "enabled", Read, "", "--precision fp16"},
      {"fp16", "auto_cast", Read, "", "a warning when true"},
      {"fp16", "loss_scale", Read, "", "--loss-scale"},
      {"fp16", "initial_scale_power", Read, "", "--initial-scale-power"},
      {"fp16", "loss_scale_window", Read, "", "--loss-scale-window"},
      {"fp16", "hysteresis", Read, "", "--hysteresis"},
      {"fp16", "consecutive_hysteresis", Read, "", "--consecutive-hysteresis"},
      {"fp16", "min_loss_scale", Read, "", "--min-loss-scale"},
      {"fp16", "fp16_master_weights_and_grads", Read, "",
       "refused when true"},
      {"bf16", "enabled", Read, "", "--precision bf16"},
      {"bf16", "immediate_grad_update", Note, "false", kPlacement},
      {"bf16", "check_grad_overflow", Note, "true",
       "ztc's bf16 steps are checked with --check-finite"},
      {"bf16", "bf16_master_weights_and_grads", Refuse, "false",
       "ztc keeps f32 master weights and f32 gradients of them under "
       "bf16; DeepSpeed's bf16 masters round every update to bf16"},
      {"bf16", "bf16_optimizer_states", Refuse, "false",
       "ztc keeps Adam's moments in f32"},

      // --- data_types ---------------------------------------------------
      {"data_types", "grad_accum_dtype", Read, "", "--grad-accum-dtype"},
      {"data_types", "param_dtype", Refuse, "",
       "ztc keeps f32 parameters; --precision bf16 or fp16 with "
       "--half-weights holds half working copies"},
      {"data_types", "buffer_dtype", Refuse, "",
       "ztc keeps the model's buffers in their exported type"},
      {"data_types", "keep_in_fp32_modules", Refuse, "\"auto\"",
       "use --keep-fp32 REGEX on the ONNX names"},

      // --- zero_optimization --------------------------------------------
      {"zero_optimization", "stage", Read, "", "--zero"},
      {"zero_optimization", "reduce_bucket_size", Read, "",
       "--reduce-bucket-elements"},
      {"zero_optimization", "overlap_comm", Read, "", "--overlap-comm"},
      {"zero_optimization", "stage3_param_persistence_threshold", Read, "",
       "--param-persistence-threshold", "param_persistence_threshold"},
      {"zero_optimization", "stage3_prefetch_bucket_size", Read, "",
       "--prefetch-elements", "prefetch_bucket_size"},
      {"zero_optimization", "stage3_max_live_parameters", Read, "",
       "--max-live-elements", "max_live_parameters"},
      {"zero_optimization", "stage3_gather_16bit_weights_on_model_save", Read,
       "", "ztc-train --save-consolidated",
       "gather_16bit_weights_on_model_save"},
      {"zero_optimization", "stage3_gather_fp16_weights_on_model_save", Read,
       "", "ztc-train --save-consolidated (DeepSpeed's deprecated name)"},
      {"zero_optimization", "contiguous_gradients", Read, "",
       "a warning when false"},
      {"zero_optimization", "reduce_scatter", Read, "", "a warning when false"},
      {"zero_optimization", "allgather_partitions", Read, "",
       "a warning when false"},
      {"zero_optimization", "ignore_unused_parameters", Read, "",
       "a warning when false"},
      {"zero_optimization", "load_from_fp32_weights", Read, "",
       "a warning when false"},
      {"zero_optimization", "offload_optimizer", Read, "",
       "a note on the CPU, a warning on CUDA"},
      {"zero_optimization", "offload_param", Read, "",
       "a note on the CPU, a warning on CUDA"},
      {"zero_optimization", "cpu_offload", Read, "",
       "as offload_optimizer with device cpu (DeepSpeed's deprecated name)"},
      {"zero_optimization", "cpu_offload_param", Read, "",
       "as offload_param with device cpu (DeepSpeed's deprecated name)"},
      {"zero_optimization", "cpu_offload_use_pin_memory", Note, "", kPlacement},
      {"zero_optimization", "allgather_bucket_size", Warn, "500000000",
       "ztc gathers stages 1-2's updated partitions per reduction bucket; "
       "--allgather-bucket-bytes joins stage 3's parameter gathers"},
      {"zero_optimization", "stage3_max_reuse_distance", Warn, "1000000000",
       "ztc gathers again for the backward", "max_reuse_distance"},
      {"zero_optimization", "sub_group_size", Warn, "1000000000",
       "ztc updates each shard in one pass"},
      {"zero_optimization", "round_robin_gradients", Warn, "false",
       "a DeepSpeed implementation detail"},
      {"zero_optimization", "elastic_checkpoint", Warn, "false",
       "ztc's checkpoints reshard on load anyway"},
      {"zero_optimization", "memory_efficient_linear", Warn, "true",
       "a DeepSpeed implementation detail"},
      {"zero_optimization", "zero_hpz_partition_size", Warn, "1",
       "ztc shards over all ranks"},
      {"zero_optimization", "stage3_model_persistence_threshold", Warn, "",
       "ztc has no such limit", "model_persistence_threshold"},
      {"zero_optimization", "stage3_module_granularity_threshold", Note, "0",
       kPlacement, "module_granularity_threshold"},
      {"zero_optimization", "stage3_use_all_reduce_for_fetch_params", Note,
       "false", kPlacement, "use_all_reduce_for_fetch_params"},
      {"zero_optimization", "stage3_allgather_sequential", Note, "false",
       kPlacement, "allgather_sequential"},
      {"zero_optimization", "use_multi_rank_bucket_allreduce", Note, "true",
       kPlacement},
      {"zero_optimization", "compute_grad_norm", Note, "true",
       "ztc computes the norm when --clip-grad-norm asks for it"},
      {"zero_optimization", "legacy_stage1", Note, "false", kPlacement},
      {"zero_optimization", "parameter_alignment", Note, "false", kPlacement},
      {"zero_optimization", "pipeline_loading_checkpoint", Note, "false",
       kPlacement},
      {"zero_optimization", "override_module_apply", Note, "true", kPlacement},
      {"zero_optimization", "log_trace_cache_warnings", Note, "false",
       "ztc-train prints what it does"},
      {"zero_optimization", "enable_sanity_checks", Note, "false",
       "ztc checks its plan at compile time"},
      {"zero_optimization", "save_muon_momentum_buffer_in_memory", Note,
       "false", "ztc has no Muon optimizer"},
      {"zero_optimization", "leaf_module", Note, "", kPlacement},
      {"zero_optimization", "zenflow", Refuse, "",
       "ZenFlow updates the important gradients' columns on the device and "
       "the rest later on the host"},
      {"zero_optimization", "zero_quantized_weights", Refuse, "false",
       "ZeRO++ quantized communication; use communication_data_type (fp16, "
       "bf16) to halve the bytes"},
      {"zero_optimization", "zero_quantized_nontrainable_weights", Refuse,
       "false", "ZeRO++ quantized weights"},
      {"zero_optimization", "zero_quantized_gradients", Refuse, "false",
       "ZeRO++ quantized communication; use communication_data_type (fp16, "
       "bf16) to halve the bytes"},
      {"zero_optimization", "zeropp_loco_param", Refuse, "", kRemoved},
      {"zero_optimization", "mics_shard_size", Refuse, "-1",
       kRemoved},
      {"zero_optimization", "mics_hierarchical_params_gather", Refuse, "false",
       kRemoved},

      // --- zero_optimization.offload_optimizer, offload_param -----------
      {"zero_optimization.offload_optimizer", "device", Read, "",
       "cpu: a note on the CPU backend; nvme: refused"},
      {"zero_optimization.offload_optimizer", "nvme_path", Note, "",
       kPlacement},
      {"zero_optimization.offload_optimizer", "buffer_count", Note, "",
       kPlacement},
      {"zero_optimization.offload_optimizer", "pin_memory", Note, "",
       kPlacement},
      {"zero_optimization.offload_optimizer", "pipeline_read", Note, "",
       kPlacement},
      {"zero_optimization.offload_optimizer", "pipeline_write", Note, "",
       kPlacement},
      {"zero_optimization.offload_optimizer", "fast_init", Note, "",
       kPlacement},
      {"zero_optimization.offload_optimizer", "ratio", Note, "", kPlacement},
      {"zero_optimization.offload_optimizer", "super_offload", Note, "",
       kPlacement},
      {"zero_optimization.offload_optimizer", "cpuadam_cores_perc", Note, "",
       kPlacement},
      {"zero_optimization.offload_param", "device", Read, "",
       "cpu: a note on the CPU backend; nvme: refused"},
      {"zero_optimization.offload_param", "nvme_path", Note, "", kPlacement},
      {"zero_optimization.offload_param", "buffer_count", Note, "",
       kPlacement},
      {"zero_optimization.offload_param", "buffer_size", Note, "", kPlacement},
      {"zero_optimization.offload_param", "max_in_cpu", Note, "", kPlacement},
      {"zero_optimization.offload_param", "pin_memory", Note, "", kPlacement},

      // --- activation_checkpointing -------------------------------------
      {"activation_checkpointing", "partition_activations", Warn, "false",
       "ztc plans what to keep itself; --recompute budget=BYTES chooses the "
       "least recomputation that fits"},
      {"activation_checkpointing", "contiguous_memory_optimization", Warn,
       "false",
       "ztc plans what to keep itself; --recompute budget=BYTES chooses the "
       "least recomputation that fits"},
      {"activation_checkpointing", "number_checkpoints", Warn, "",
       "ztc plans what to keep itself; --recompute budget=BYTES chooses the "
       "least recomputation that fits"},
      {"activation_checkpointing", "synchronize_checkpoint_boundary", Note,
       "false", kPlacement},
      {"activation_checkpointing", "profile", Warn, "false",
       "`ztc inspect --recompute all` compares the plans"},
      {"activation_checkpointing", "cpu_checkpointing", Note, "false",
       "ztc recomputes what it does not keep instead of moving activations "
       "to the host; what is computed is the same"},
  };
  return keys;
}

} // namespace

const DeepSpeedKey *findDeepSpeedKey(const std::string &section,
                                     const std::string &key) {
  // DeepSpeed reads "bfloat16" as "bf16".
  const std::string &where = section == "bfloat16" ? "bf16" : section;
  for (const DeepSpeedKey &entry : table())
    if (where == entry.section &&
        (key == entry.key || (entry.alias && key == entry.alias)))
      return &entry;
  return nullptr;
}

const std::vector<DeepSpeedKey> &deepSpeedKeys() { return table(); }

} // namespace ztc::rt
